package rules_test

import (
	"context"
	"fmt"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/metrics"
	"github.com/bulwark-go/bulwark/rules"
)

// A rules document gives the group "search" a token bucket of 2 calls at
// once and 1 a second: the third call at once is RATE_LIMITED.
func ExampleManager_ApplyJSON() {
	clock := new(metrics.ManualClock)
	reg := command.NewRegistry(command.RegistryConfig{Clock: clock})
	defer reg.Close(context.Background())
	m, err := rules.NewManager(reg, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = m.ApplyJSON([]byte(`{"groups": {"search": {"strategy": "semaphore",
		"rateLimit": {"tokenBucket": {"rate": 1, "burst": 2}}}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	search, _ := reg.Group("search")
	find := command.Func("find", func(context.Context) (string, error) { return "found", nil }, nil)
	for range 3 {
		_, info, _ := command.ExecuteInfo(context.Background(), search, find)
		fmt.Println(info.Event)
	}
	// Output:
	// SUCCESS
	// SUCCESS
	// RATE_LIMITED
}
