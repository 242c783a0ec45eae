package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/command/fallback"
	"github.com/bulwark-go/bulwark/metrics"
)

// price serves the last good price, for at most a minute, when the feed is
// down: the embedded *LastGood provides Fallback.
type price struct {
	*fallback.LastGood[float64]
	feedUp bool
}

func (p price) Run(ctx context.Context) (float64, error) {
	if !p.feedUp {
		return 0, errors.New("feed down")
	}
	p.Store(101.5)
	return 101.5, nil
}

func ExampleLastGood() {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock})
	defer reg.Close(context.Background())
	quotes, err := reg.NewGroup("quotes", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}
	last, err := fallback.NewLastGood[float64](time.Minute, clock)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	v, info, err := command.ExecuteInfo(ctx, quotes, price{last, true})
	fmt.Println(v, info.Degraded, err)

	clock.Advance(30 * time.Second)
	v, info, err = command.ExecuteInfo(ctx, quotes, price{last, false})
	_, age, _ := last.Load()
	fmt.Println(v, info.Degraded, err, "age", age)

	clock.Advance(time.Minute)
	v, info, err = command.ExecuteInfo(ctx, quotes, price{last, false})
	fmt.Println(v, info.Degraded, errors.Is(err, fallback.ErrStale), info.Events)
	// Output:
	// 101.5 false <nil>
	// 101.5 true <nil> age 30s
	// 0 false true FAILURE|FALLBACK_FAILURE|EXCEPTION_THROWN
}

// recommend falls back to an empty list, which callers can tell from a real
// empty list by command.Info.Degraded.
type recommend struct {
	fallback.Static[[]string]
}

func (recommend) Run(ctx context.Context) ([]string, error) {
	return nil, errors.New("recommender overloaded")
}

func ExampleStatic() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	recs, err := reg.NewGroup("recommendations", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}

	list, info, err := command.ExecuteInfo(context.Background(), recs, recommend{fallback.Static[[]string]{Value: []string{}}})
	fmt.Println(len(list), info.Degraded, err)
	// Output: 0 true <nil>
}

// recommendations turns the feature off when the dependency fails: the
// answer is empty, and command.Info says why, so nobody reads it as "no data".
type recommendations struct {
	fallback.FeatureOff[[]string]
}

func (recommendations) Run(ctx context.Context) ([]string, error) {
	return nil, errors.New("recommender down")
}

func ExampleFeatureOff() {
	reg := command.NewRegistry(command.RegistryConfig{})
	defer reg.Close(context.Background())
	recs, err := reg.NewGroup("recs", command.GroupConfig{Strategy: command.Semaphore})
	if err != nil {
		panic(err)
	}
	list, info, err := command.ExecuteInfo(context.Background(), recs, recommendations{})
	fmt.Println(len(list), err, info.Degraded, info.Events.Has(metrics.DegradedFeatureOff))
	// Output: 0 <nil> true true
}
