package command

// exporter publishes a registry's groups and commands to a metrics system,
// set in RegistryConfig.Exporter; package gmbridge implements it for
// go-metrics, its only implementation: the interface is not part of the
// API. The registry calls Export when it creates a group, before
// NewGroup returns (an error refuses the group), ExportCommand when a group
// creates a command (an error is logged, and the command runs unexported),
// and Unexport from the group's Close. None of them is on the call path.
// An exporter must be safe for concurrent use.
type exporter interface {
	Export(g *Group) error
	ExportCommand(g *Group, command string) error
	Unexport(g *Group)
}
