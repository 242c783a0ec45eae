package grpcguard

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bulwark-go/bulwark/command"
)

// DefaultMaxGroups is the default of ClientConfig.MaxGroups and
// ServerConfig.MaxGroups.
const DefaultMaxGroups = 1000

// groups finds and creates the groups of an interceptor in its registry,
// at most max of them open at once.
type groups struct {
	reg    *command.Registry
	cfg    command.GroupConfig
	max    int
	logger *slog.Logger

	mu      sync.Mutex          // serialises creations
	created map[string]struct{} // the names of the groups this one created, open or closed
	warned  bool                // the limit was reached and logged
}

func newGroups(reg *command.Registry, cfg command.GroupConfig, maxGroups int, logger *slog.Logger) *groups {
	if maxGroups == 0 {
		maxGroups = DefaultMaxGroups
	}
	if logger == nil {
		logger = reg.Config().Logger
	}
	return &groups{reg: reg, cfg: cfg, max: maxGroups, logger: logger, created: map[string]struct{}{}}
}

// get returns the registry's group called name, created with the config
// if there is none. Its error has a gRPC status: ResourceExhausted and
// ErrTooManyGroups when max groups that this one created are open, and
// Unavailable (command.ErrClosed) or Internal (a name NewGroup refuses)
// when the registry cannot create the group.
func (gs *groups) get(name string) (*command.Group, error) {
	if g, ok := gs.reg.Group(name); ok {
		return g, nil
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if _, known := gs.created[name]; !known && len(gs.created) >= gs.max {
		for n := range gs.created {
			if _, open := gs.reg.Group(n); !open {
				delete(gs.created, n)
			}
		}
		if len(gs.created) >= gs.max {
			if !gs.warned {
				gs.warned = true
				gs.logger.Warn("grpcguard: group limit reached: calls that need a new group are refused",
					slog.Int("max_groups", gs.max), slog.String("group", name))
			}
			err := fmt.Errorf("%w: group %q refused: %d groups are open (MaxGroups)", ErrTooManyGroups, name, gs.max)
			return nil, &statusError{st: status.New(codes.ResourceExhausted, err.Error()), err: err}
		}
	}
	g, err := gs.reg.GroupOrNew(name, gs.cfg)
	if err != nil {
		err = fmt.Errorf("grpcguard: %w", err)
		code := codes.Internal
		if errors.Is(err, command.ErrClosed) {
			code = codes.Unavailable
		}
		return nil, &statusError{st: status.New(code, err.Error()), err: err}
	}
	gs.created[name] = struct{}{}
	return g, nil
}
