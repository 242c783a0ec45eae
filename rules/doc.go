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
// queueSize, timeout, fallbackLimit, slowCallDuration, maxCommands,
// noFallback, breaker, commandBreaker, commands. Breaker fields (breaker,
// commandBreaker, and a command's breaker): window {length, buckets},
// minRequests, failureRatio, slowCallDuration, slowCallRatio, openDuration,
// backoffMultiplier, maxOpenDuration, halfOpenProbes, halfOpenSuccesses,
// halfOpenMaxWait, rampUp, rampUpFloor, warmUp. Command fields: timeout,
// slowCallDuration, breaker. Durations are Go duration strings ("80ms",
// "1m30s"); a timeout may be "none" (command.NoTimeout). The meaning of
// each field is that of command.GroupConfig and circuit.Config. warmUp
// counts from a breaker's creation, so it takes effect for groups and
// commands the rules create; a document that changes it for a breaker that
// runs already is rejected whole (Group.WarmUp starts a warm-up now).
//
// What a group's settings become: the base is the preset when one is named,
// else the group's baseline (its config when the rules first touched it;
// the zero GroupConfig for a group the rules create); the fields the
// document sets override the base, and a breaker object overrides the
// base's breaker field by field. What a document cannot express (the
// IsBadRequest classifier, loggers, clocks, OnTransition, breaker modes)
// always comes from the baseline. A group the document no longer names
// returns to its baseline; a group it names that does not exist is
// created.
//
// A document is applied whole or not at all: it is parsed strictly
// (unknown fields are errors, reported with their line and column), every
// group's new config is checked (Group.CheckReconfigure) before the first
// change, and an error leaves every group as it was.
package rules
