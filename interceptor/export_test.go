package interceptor

// SetOrphanRetryLimit lowers the MaxOrphanRetries bound of i, so a test can
// reach it.
func SetOrphanRetryLimit(i *Interceptor, n int) {
	i.bgMu.Lock()
	defer i.bgMu.Unlock()
	i.bgLimit = n
}
