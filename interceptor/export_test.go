package interceptor

// SetOrphanRetryLimit lowers the MaxOrphanRetries bound of i, so a test can
// reach it.
func SetOrphanRetryLimit(i *Interceptor, n int) {
	i.bgMu.Lock()
	defer i.bgMu.Unlock()
	i.bgLimit = n
}

// WaitBackground waits until the background work of i — the attempts to
// settle orphaned claims (Options.OrphanRetry) — has ended, without
// stopping it: a test that runs one execution at a time calls it between
// two.
func WaitBackground(i *Interceptor) { i.bg.Wait() }
