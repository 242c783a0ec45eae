package command

// Write is implemented by a command that changes the dependency's state (a
// payment, an order, an update): in read-only mode (GroupConfig.ReadOnly,
// Registry.SetReadOnly) a call of a command whose Write method returns true
// is refused as READ_ONLY with ErrRefused, while every other call goes on.
// A command may answer by its request (a batch that only reads says
// false). Without the method a command is a read: read-only mode is a
// switch for storage failover, when the primary cannot take writes and
// the replicas still serve reads, so only a command marked as a write is
// refused (a Func is a read: write a command type for a write).
type Write interface {
	Write() bool
}

// writes reports whether a call of cmd is a write: cmd's Write method
// says so. A panic in Write judges
// yes (the call is refused, which read-only mode is for) and is logged.
// The call converts the command to an interface (an allocation for a
// command struct with fields); limit asks only in a read-only group.
func (g *Group) writes(cmd any) (yes bool) {
	w, is := cmd.(Write)
	if !is {
		return false
	}
	yes = true
	defer g.recoverHook("Write")
	return w.Write()
}

// SetReadOnly switches read-only mode for every group of the registry, the
// ones created later included: while it is on, each group refuses writes as
// if its GroupConfig.ReadOnly were set (see Write); turning it off leaves
// the groups whose own ReadOnly is set read-only. It applies to the calls
// that start after it returns, and logs the switch at Warn level (on) or
// Info (off) once. It takes each group's lock in turn, as Reconfigure
// does: Execute of a known command never waits for it.
func (r *Registry) SetReadOnly(on bool) {
	r.ready()
	r.mu.RLock() // NewGroup holds r.mu: a group is created before the switch or listed here
	if r.readOnly.Swap(on) == on {
		r.mu.RUnlock()
		return
	}
	groups := make([]*Group, 0, len(r.groups))
	for _, g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.RUnlock()
	for _, g := range groups {
		g.refreshSettings()
	}
	if on {
		r.logger.Warn("bulwark: registry read-only: writes are refused", "groups", len(groups))
	} else {
		r.logger.Info("bulwark: registry read-only mode off", "groups", len(groups))
	}
}

// refreshSettings rebuilds the settings of the group's commands from its
// config in force and its registry's read-only switch.
func (g *Group) refreshSettings() {
	g.mu.Lock()
	defer g.mu.Unlock()
	cfg := g.cfg()
	for name, c := range g.commands.Load().byName {
		c.settings.Store(cfg.settingsOf(g, name))
	}
}
