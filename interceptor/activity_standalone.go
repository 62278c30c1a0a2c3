package interceptor

import (
	"strconv"

	sdkactivity "go.temporal.io/sdk/activity"
)

// standaloneRunPrefix begins every [StandaloneRun]. Its first byte, 0xFF,
// never occurs in valid UTF-8.
const standaloneRunPrefix = "\xffactivity:"

// StandaloneRun returns the run component of the key of a standalone
// activity (one started with client.ExecuteActivity, outside any workflow)
// with activityID in namespace:
//
//	"\xff" "activity:" decimal(len(namespace)) ":" namespace ":" activityID
//
// The activity ID is what the server admits a standalone activity by, so
// every attempt of it, and every later run of the same ID (which the
// server allows once a run has closed, under its ID reuse policy), derives
// the same key and finds the same record; another activity ID is another
// key, as another workflow run is. The namespace is part of it because an
// activity ID is unique within its namespace only.
//
// It never equals a workflow run ID or workflow ID, the run components of
// keys of activities that belong to a workflow ([ScopeRun], [ScopeWorkflow]):
// Temporal carries those as protobuf strings, which are valid UTF-8, and
// 0xFF is not. The length prefix makes it unambiguous: no two pairs of
// namespace and activity ID share one. Like the key encoding it feeds, this
// form is a compatibility promise: changing it would leave records under
// the old form unmatched.
func StandaloneRun(namespace, activityID string) string {
	return standaloneRunPrefix + strconv.Itoa(len(namespace)) + ":" + namespace + ":" + activityID
}

// standalone reports whether info is the execution of a standalone
// activity: one that belongs to no workflow.
func standalone(info sdkactivity.Info) bool {
	return info.WorkflowExecution.ID == "" && info.ActivityID != ""
}
