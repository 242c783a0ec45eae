package bulwarkotel

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/bulwark-go/bulwark/metrics"
)

// The attribute keys of every metric and span attribute this package
// reports, in the OpenTelemetry semantic conventions' style (a namespace,
// dots between its levels, snake_case inside one). Their values are
// bulwark's names: the group's and the command's (valid UTF-8, at most
// command.MaxNameLength bytes, from a set the registry bounds), an event's
// label (metrics.Event.Label: "success", "short_circuited"), a state's or
// a mode's String ("half-open", "forced-open") and a transition reason
// ("error_ratio").
const (
	KeyGroup      = attribute.Key("bulwark.group")               // the group: one dependency
	KeyCommand    = attribute.Key("bulwark.command")             // the command's name in its group
	KeyEvent      = attribute.Key("bulwark.event")               // an event, or a call's or attempt's primary outcome
	KeyState      = attribute.Key("bulwark.circuit.state")       // a breaker's state
	KeyMode       = attribute.Key("bulwark.circuit.mode")        // a breaker's mode
	KeyFrom       = attribute.Key("bulwark.circuit.from")        // a transition's state before
	KeyTo         = attribute.Key("bulwark.circuit.to")          // a transition's state after
	KeyReason     = attribute.Key("bulwark.circuit.reason")      // a transition's reason
	KeyGroupState = attribute.Key("bulwark.group.circuit.state") // on spans: the group breaker's state
	KeyAttempt    = attribute.Key("bulwark.attempt")             // on spans: the attempt's number, from 1
	KeyDegraded   = attribute.Key("bulwark.degraded")            // on spans: the caller got a fallback's value
	KeyFallback   = attribute.Key("bulwark.fallback")            // on spans: the fallback's event, if a fallback was considered
	KeyProbe      = attribute.Key("bulwark.probe")               // on spans: the attempt was a half-open probe
	KeyDeferred   = attribute.Key("bulwark.deferred")            // on spans: the fallback deferred the call's work
	KeyRetried    = attribute.Key("bulwark.retried")             // on spans: the attempt failed and is retried
)

// fallbackEvents are the events that tell how a fallback went; a call has
// at most one of them.
var fallbackEvents = [...]metrics.Event{
	metrics.FallbackSuccess, metrics.FallbackFailure, metrics.FallbackRejection, metrics.FallbackMissing,
}
