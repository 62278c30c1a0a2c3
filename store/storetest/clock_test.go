package storetest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tesserix/idempotency/store/storetest"
)

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		move func(c *storetest.Clock)
		want time.Time
	}{
		{"Still", func(*storetest.Clock) {}, start},
		{"Advance", func(c *storetest.Clock) { c.Advance(time.Hour) }, start.Add(time.Hour)},
		{"AdvanceBack", func(c *storetest.Clock) { c.Advance(-time.Minute) }, start.Add(-time.Minute)},
		{"Set", func(c *storetest.Clock) { c.Set(start.AddDate(1, 0, 0)) }, start.AddDate(1, 0, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := storetest.NewClock(start)
			tt.move(c)
			assert.Equal(t, tt.want, c.Now())
		})
	}
}

func TestClockConcurrentAdvance(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(time.Unix(0, 0))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, time.Unix(0, 0).Add(1600*time.Millisecond), c.Now())
}
