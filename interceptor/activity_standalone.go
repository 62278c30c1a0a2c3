package interceptor

import (
	sdkactivity "go.temporal.io/sdk/activity"
)

// standalone reports whether info is the execution of a standalone
// activity: one that belongs to no workflow.
func standalone(info sdkactivity.Info) bool {
	return info.WorkflowExecution.ID == "" && info.ActivityID != ""
}
