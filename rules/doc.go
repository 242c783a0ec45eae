// Package rules applies live settings to a command.Registry's groups from a
// JSON rules document, loaded at start and watched for changes: an operator
// widens a window during a deploy, shrinks a bulkhead under pressure or
// tightens one command's breaker without a restart.
//
// A rules document names groups, each with an optional preset
// (command.Preset) and field overrides, and its commands' own settings:
//
//	{
//	  "groups": {
//	    "recommendations": {
//	      "preset": "l1",
//	      "maxConcurrent": 20,
//	      "commands": {"similar": {"timeout": "50ms", "breaker": {"failureRatio": 0.3}}}
//	    },
//	    "payments": {"preset": "never-degrade", "strategy": "semaphore", "maxConcurrent": 8}
//	  }
//	}
//
// Group fields: preset, strategy ("thread" or "semaphore"), maxConcurrent,
// queueSize, timeout, fallbackLimit, maxCommands,
// noFallback, readOnly, deadlineReserve, retry, throttle {k}, priority
// {reserve, default}, rateLimit, keyedRateLimit, breaker, commandBreaker,
// commands. Breaker fields (breaker, commandBreaker, and a command's
// breaker), in circuit.Config's order, its fields that share a prefix
// grouped in one object (open.duration is OpenDuration, open.max
// OpenMaxDuration): window {length, buckets}, minRequests, failureRatio, slowCallDuration,
// slowCallRatio, confidence, open {duration, backoff, max}, halfOpen {probes,
// successes, maxWait}, ramp {duration, floor}, warmUp. (A document written
// for the first, flat format, with halfOpenProbes and the like, is refused
// with an error that names the new place of each such field.) Retry fields: maxAttempts, backoff,
// maxBackoff, maxRetryAfter, budgetRatio, budgetMinPerSecond (a retry
// object overrides the base's field by field; Sleep, Rand and NoBudget
// are for code and come from the base). Command fields: timeout, breaker,
// rateLimit. (A group's or a command's slowCallDuration of earlier
// documents is refused with an error that names its place now: the
// command breaker's.) Durations are Go duration strings
// ("80ms", "1m30s"); only a timeout (a group's or a command's) may also be
// "none" (command.NoTimeout: no timeout), any other duration refuses it. The
// meaning of each field is that of command.GroupConfig,
// retry.Config and circuit.Config. warmUp counts from a breaker's
// creation, so it takes effect for groups and commands the rules create; a
// document that changes it for a breaker that runs already is rejected
// whole, the error naming the breaker and WarmUp (Group.WarmUp starts a
// warm-up now). A document that no longer sets a command's warm-up (it
// drops the command's breaker, the command or its group) keeps the warm-up
// the command's breaker runs with: a command left to the commandBreaker
// template then runs the template's settings with its own warm-up. Alerts
// (GroupConfig.Alerts, package alert) cannot change live, so a document cannot set them:
// they come from the baseline.
//
// A key that an object repeats is refused (struct fields as the decoder
// matches them, case aside; group and command names when equal), at its
// line and column: the decoder would silently keep the last one. So is an
// explicit zero for a field whose zero would silently mean a default: a
// group's maxConcurrent, timeout, fallbackLimit and maxCommands; a
// command's timeout; a retry's
// backoff, maxBackoff, maxRetryAfter, budgetRatio and budgetMinPerSecond;
// a breaker's window length and buckets, minRequests, failureRatio,
// open.duration, open.max, halfOpen.probes, halfOpen.successes,
// halfOpen.maxWait and ramp.floor; a limiter's burst, window, buckets and
// maxKeys. Omit such a field for the default (more exactly, to keep the
// base's value, see below), write the value meant, or "none" for no
// timeout. A zero that means off (deadlineReserve, throttle.k, a priority
// reserve of all zeros, a breaker's slowCallDuration, slowCallRatio,
// confidence, open.backoff, ramp.duration and warmUp, a retry's maxAttempts) or is the value itself (queueSize) is accepted.
//
// Rate limits are declared, one kind of package ratelimit each:
//
//	"rateLimit": {"tokenBucket": {"rate": 100, "burst": 20}}
//	"rateLimit": {"slidingWindow": {"limit": 100, "window": "1s", "buckets": 2}}
//	"keyedRateLimit": {"maxKeys": 10000, "tokenBucket": {"rate": 5, "burst": 5}}
//
// A group's rateLimit is its GroupConfig.RateLimit, a command's its
// CommandConfig.RateLimit; keyedRateLimit is GroupConfig.KeyedRateLimit, a
// ratelimit.PerKey that gives each key (command.WithKey) a limiter as
// declared and keeps at most maxKeys of them (0: ratelimit.DefaultMaxKeys).
// A limiter is stateful (a bucket's tokens, a window's counts), so a
// document applied again with the same spec in the same place (group,
// command, or keyed) keeps the running limiter, state and all: an
// unrelated edit neither refills a bucket nor empties a window. A changed
// spec, as written (burst 0 and burst 1 differ), builds a new limiter,
// which starts full (a bucket) or empty (a window); so does a spec
// removed and declared again. The limiters tell time by the registry's
// clock (the Clock of command.Registry.Config), so Execute hands them its
// own clock readings. A limiter set in code stays unless
// the document declares one in its place; a document cannot remove it.
//
// What a group's settings become: the base is the preset when one is named,
// else the group's baseline (its config when the rules first touched it;
// for a group the rules create, the zero GroupConfig with the strategy and
// breakers' warm-up it was created with, which cannot change); the fields
// the document sets override the base, and a breaker or retry object
// overrides the base's field by field. What a document cannot express (the
// IsBadRequest and probe classifiers, alerts, the retry's Sleep, Rand and
// NoBudget, loggers, clocks, OnTransition, breaker modes) and the limiters
// set in code (unless the document declares one in their place) always
// come from the baseline, under a preset too. A group the document no
// longer names returns to its baseline; a group it names that does not
// exist is created.
//
// LoadFile and Watch read a regular file only (a FIFO would block a read
// past any cancellation: ErrNotRegular), of at most MaxFileSize bytes.
// Watch polls the file's stat, reads the file only when the stat moved and
// applies it only when its contents changed, and logs an unreadable file
// once per episode (see Manager.Watch).
//
// A document is applied whole or not at all: it is parsed strictly
// (unknown fields, repeated keys and the zeros above are errors, reported
// with their line and column), every group's new config is checked before
// the first change (Group.CheckReconfigure; for a group to create, its
// name and GroupConfig.Validate), and an error leaves every group, limiter
// and baseline as it was (a fuzz test, FuzzRefusedDocumentChangesNothing,
// holds it to that). The groups to create are created before any other
// group changes: should the registry still refuse one (its metrics' names
// taken in the go-metrics registry, say), those created are closed again
// and nothing changed. The one change that can still fail later is the
// reconfiguration of a group that code closes meanwhile; the error names
// it.
package rules
