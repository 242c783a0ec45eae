package gmbridge_test

import (
	"context"
	"errors"
	"fmt"

	gometrics "github.com/rcrowley/go-metrics"

	"github.com/bulwark-go/bulwark/command"
	"github.com/bulwark-go/bulwark/gmbridge"
)

// A registry whose groups publish into a go-metrics registry, for its
// reporters; here two failed calls read back.
func Example() {
	gm := gometrics.NewRegistry()
	reg := command.NewRegistry(command.RegistryConfig{Exporter: gmbridge.New(gm)})
	defer reg.Close(context.Background())
	profiles, err := reg.NewGroup("profiles", command.GroupConfig{})
	if err != nil {
		panic(err)
	}
	get := command.Func("getProfile", func(context.Context) (string, error) {
		return "", errors.New("profile store down")
	}, nil)
	for range 2 {
		_, _ = command.Execute(context.Background(), profiles, get)
	}

	calls := gm.Get("command.profiles.getProfile.calls").(gometrics.Counter)
	failures := gm.Get("command.profiles.getProfile.rolling.failure").(gometrics.Gauge)
	fmt.Println(calls.Count(), failures.Value())
	// Output: 2 2
}
