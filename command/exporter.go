package command

// Exporter publishes a registry's groups and commands to a metrics system,
// set in RegistryConfig.Exporter; package gmbridge implements it for
// go-metrics. The registry calls Export when it creates a group, before
// NewGroup returns (an error refuses the group), ExportCommand when a group
// creates a command (an error is logged, and the command runs unexported),
// and Unexport from the group's Close. None of them is on the call path.
// An Exporter must be safe for concurrent use.
type Exporter interface {
	Export(g *Group) error
	ExportCommand(g *Group, command string) error
	Unexport(g *Group)
}
