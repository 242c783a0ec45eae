// Package dashboard publishes a command.Registry as a Hystrix-compatible
// hystrix.stream (Server-Sent Events) and serves a live browser dashboard
// that reads it. Both are plain http.Handlers: mount them in any mux, on the
// address you choose (loopback is the safe default), next to the service.
//
//	reg := command.NewRegistry(command.RegistryConfig{})
//	// ... groups and commands ...
//	h, err := dashboard.New(reg, dashboard.Config{})
//	if err != nil { ... }
//	mux := http.NewServeMux()
//	mux.Handle("/ops/", http.StripPrefix("/ops", h)) // page at /ops/, stream at /ops/hystrix.stream
//	log.Fatal(http.ListenAndServe("127.0.0.1:7979", mux))
//
// NewStream and NewPage build the two halves apart, for a page in one place
// and a stream in another (PageConfig.StreamURL tells the page where to
// look). The stream reads its data through Source, which *command.Registry
// satisfies; nothing in this package changes the registry. The one part of
// the dashboard that does, the control endpoint (force a breaker open or
// closed, reset it, apply rules; off by default, behind a token), is
// package dashboard/control: New serves it when Config.Control is set.
//
// # The stream
//
// A client gets text/event-stream with the headers Hystrix sends. Every
// interval (500 ms, or ?delay=<ms> clamped to [Config.MinInterval,
// Config.MaxInterval], however many digits it has; a delay that is not a
// positive whole number is answered 400) it receives, each as "data: <json>" and a blank line, with no
// event name:
//   - one HystrixCommand event per command, with all 48 keys of Hystrix 1.5;
//   - one HystrixThreadPool event per group isolated by a goroutine pool, with
//     all 17 keys (semaphore groups have none, as in Hystrix);
//   - one BulwarkCommand event per command and one BulwarkGroup event per
//     group: bulwark's own data (breaker state and mode, time in state, last
//     transitions with their reasons and wall times, half-open progress,
//     backed-off open duration, retry-after, ramp-up share, slow ratio,
//     degraded rate, detached executions, in-flight calls, half-open probes
//     counted, alert tier and degraded alarm). Hystrix tools
//     ignore event types they do not know;
//   - then "ping: " and a blank line, a field EventSource ignores, which makes
//     a dead connection show.
//
// More than Config.MaxClients connections at once (default 5, like Hystrix)
// are answered 503, as are stream requests after Close or once the server's
// Shutdown has begun.
//
// # One snapshot per tick, whatever the number of clients
//
// Clients that ask for the same delay share one hub goroutine. It starts
// with the first such client, takes one Source snapshot per tick, encodes it
// once into one frame and offers that frame to each client's mailbox, which
// holds only the newest frame; it stops when the last client leaves, and the
// handler of that client waits for it, so no goroutine outlives the stream's
// handlers. Each client writes from its own handler goroutine: a slow client
// skips the frames it had no time for, and a client whose connection does
// not take a frame within Config.WriteTimeout is disconnected and frees its
// slot at once. Neither ever blocks the hub, the other clients or the
// commands.
//
// # Stalled clients, Close and Shutdown
//
// A client that stops reading must not keep its slot: MaxClients of them
// would lock every other viewer out. Its writes fail only once the
// operating system's buffers for the connection are full, and on Linux the
// send buffer of a connection whose peer does not read grows to megabytes,
// which at small frames and long delays takes minutes. So an HTTP/1.x
// request whose ResponseWriter can be hijacked is served on the connection
// taken over from net/http: the stream writes the response head itself
// (with "Connection: close"; the body runs until the connection closes),
// gives the connection a small send buffer (Config.WriteBuffer), sets a
// write deadline of Config.WriteTimeout on every write, and resets the
// connection of a client that missed one. A stalled client then loses its
// slot within about WriteTimeout plus the few frames the buffers hold. A
// goroutine per connection reads and discards what the client sends, and
// ends the stream when the client closes the connection. The stream sets
// its own deadlines, so a server's ReadTimeout or WriteTimeout does not cut
// it off.
//
// Other requests (HTTP/2, or a middleware wrapper that hides Hijack and has
// no Unwrap method) are served through the ResponseWriter, with
// http.ResponseController's write deadlines where it has them; the request
// context tells that the client left. There the system sizes the buffers
// and a stall can stay hidden much longer: see Config.WriteTimeout for what
// to do.
//
// http.Server does not track the connections the stream took over: its
// Close and CloseClientConnections leave them open. Its Shutdown ends them,
// and the server's other streams too (which Shutdown would otherwise wait
// for forever): the first stream request a server passes registers a hook
// with RegisterOnShutdown (the Stream keeps a reference to each server it
// registered with, for its life). Stream.Close (Handler.Close) ends every stream,
// answers later stream requests 503 and waits for the handlers: call it
// before http.Server.Close, or to stop the stream on a server that stays.
//
// A Source whose Snapshot panics does not take the process down: the hub
// recovers, logs the first panic of a run at Error with its stack, sends
// ping-only frames meanwhile (the clients stay connected and see no data),
// and real frames again, logged at Info, once a Snapshot succeeds.
//
// # How the Hystrix keys map to bulwark
//
// One deliberate difference: errorPercentage, errorCount and requestCount are
// the command breaker's own health figures: FAILURE+TIMEOUT over
// SUCCESS+FAILURE+TIMEOUT in its window. Hystrix counts thread-pool and
// semaphore rejections as errors too; bulwark's breaker leaves its own
// refusals out, since counting them would make the breaker trip itself, and
// the stream reports the figure the breaker acts on. The rejections stay
// visible in rollingCountThreadPoolRejected and rollingCountSemaphoreRejected.
//
// Other choices, where Hystrix has no exact equivalent:
//   - isCircuitBreakerOpen is true while the command's calls are refused by
//     a breaker: when the command's breaker or its group's breaker is open,
//     half-open (only probes pass, as in Hystrix) or forced open. An
//     observe-only breaker never refuses, so it reads false, and
//     propertyValue_circuitBreakerEnabled is false for it. The native event
//     carries each breaker's computed state.
//   - propertyValue_circuitBreakerSleepWindowInMilliseconds is the open
//     duration in force (after backoff); RequestVolumeThreshold and
//     ErrorThresholdPercentage are the breaker's MinRequests and FailureRatio.
//   - rollingCountThreadPoolRejected (and the pool's
//     rollingCountCommandRejections) also count QUEUE_TIMEOUT calls, which
//     Hystrix has no key for: the pool could not start them in time, as for
//     a rejection; rollingCountTimeout counts only Runs that timed out. The
//     native event has the queue timeouts apart (rollingCountQueueTimeout).
//   - rollingCountSemaphoreRejected also counts RATE_LIMITED and THROTTLED
//     calls, which Hystrix has no key for: refused at the door before Run, as a
//     semaphore rejection is (whatever the group's strategy), so Hystrix
//     tools show them as rejections; the pool's rollingCountCommandRejections
//     does not (the pool refused nothing). The native event has them apart
//     (rollingCountRateLimited, rollingCountThrottled). PRIORITY_REJECTED
//     (priority shedding, see priority.Config) is counted there too,
//     for the same reason, and apart in the native event
//     (rollingCountPriorityRejected).
//   - RETRIED, an attempt that failed and was retried (see
//     retry.Config), has no Hystrix key and is left out of the
//     Hystrix event: its counts are of attempts, so each retried attempt is
//     already in rollingCountFailure or rollingCountTimeout with its own
//     outcome, and counting RETRIED in any key would count it twice. The
//     native event has it (rollingCountRetried).
//   - COALESCED, a call that shared another call's Run (see
//     command.CommandConfig.Coalesce), is rollingCountCollapsedRequests,
//     Hystrix's key for the requests its collapser batched, and the native
//     event's rollingCountCoalesced. Hystrix counts no other outcome for
//     such a call, nor does bulwark: its one primary outcome is COALESCED.
//   - HEDGED, an attempt of a hedged call whose answer the caller did not
//     take (see package command/hedge), is left out of the Hystrix event as
//     RETRIED is: the attempt is already in the key of its own outcome. The
//     native event has it (rollingCountHedged).
//   - both timeout keys carry the command's timeout (0 when it has none);
//     interruptOnTimeout is true, since a timed-out call's context is
//     cancelled.
//   - executionIsolationSemaphoreMaxConcurrentRequests is the group's bulkhead
//     capacity (semaphore permits, or pool size) and
//     fallbackIsolationSemaphoreMaxConcurrentRequests its fallback limit.
//   - rollingCountCollapsedRequests, rollingCountEmit, rollingCountFallbackEmit
//     and rollingCountResponsesFromCache are 0 (bulwark has no collapser, no
//     observable commands and no request cache); requestCacheEnabled and
//     requestLogEnabled are false; executionIsolationThreadPoolKeyOverride is
//     null (the pool is always the group, given in threadPool); reportingHosts
//     is 1.
//   - thread-pool events: core, maximum and current pool size are the pool's
//     size; largest is the highest number of busy workers since start;
//     rollingCountThreadsExecuted counts the window's calls that ran
//     (SUCCESS, FAILURE, TIMEOUT, BAD_REQUEST); currentTaskCount is completed
//     plus active plus queued.
//   - latencies are whole milliseconds, truncated; latencyExecute is the run
//     time, latencyTotal the time the caller waited.
//
// # The page
//
// The page is embedded in the binary (no CDN, works offline). Per command it
// shows a circle sized by request rate and coloured by health, a two-minute
// sparkline, the window's counters, error %, the circuit state with its time
// in state and last trip reason, latency percentiles, the degraded rate and,
// when there are any, its detached calls (timed out, still running); per
// group, the bulkhead's active, queued, size, rejected and detached counts
// and the group breaker. Every name is inserted as text, never as HTML.
//
// It is built for hundreds of commands. Tiles or a compact table (one row
// per command, sorted by the column clicked) show the same commands, which
// can be filtered by name and by state and grouped by group in sections
// that fold away, each headed by a summary of its breakers and bulkhead.
//
// The order holds still while values only jitter. By error % (the default)
// commands are ordered by state, worst first: their breaker's, then the
// health colour of their error % (10, 25, 40, 50 %), and by volume within
// one; a command moves when its breaker or its colour changes, not at each
// step of an error % that climbs. The values a sort compares follow the
// live ones only once these have moved by more than chance would (three
// standard deviations of the window's counts, for error % and rates), by
// a quarter, and by 5 points of error % or 0.5 req/s.
//
// A counter shows once the command uses its feature: always success,
// failure and rejected; timeout with a timeout set, short-circuited with a
// breaker that can refuse, the others once they have counted (the stream
// does not say whether a rate limiter, retries or a fallback are
// configured). Where there is no data (a command with no calls in the
// window has no latency, one with no breaker requests no error %) it shows
// "–". The page reads the stream with fetch rather than EventSource (which
// makes a task of each event, thousands a second with hundreds of
// commands), draws once per frame of the stream (at its ping), and only
// the commands whose events changed and the tiles and rows on screen. The
// URL can preselect the view:
// ?view=table, ?group=1, ?sort=error|volume|name|state|latency,
// ?state=all|attention|open|half-open|forced|closed, ?filter=<text>.
//
// Tiles carry data-command, data-group and data-state attributes, table
// rows data-row, data-group and data-state (and pool tiles data-pool,
// group sections data-section) for scripts and browser tests, e.g.
// [data-command="GetUser"] .state. The page reconnects by itself and shows
// a "reconnecting" badge while the stream is down. It offers control
// actions (force open or closed, reset, apply rules) only when the handler
// has a control endpoint (Config.Control) and the operator has entered its
// token; otherwise nothing on it can change a breaker.
//
// # History
//
// A stream remembers each command's request and error rates, one point per
// Config.HistoryStep (1 s) over Config.History (2 min), and sends a new
// client one BulwarkHistory event per command before its first frame
// ({"type":"BulwarkHistory","name":..,"group":..,"stepMs":1000,"points":
// [[epoch ms, requests/s, errors/s], ...]}, oldest first), so the page's
// sparklines are full on open and survive a reload. Points are recorded
// from the frames the stream builds; Stream.KeepHistory records them while
// nobody watches.
//
// # Fleets
//
// NewAggregate merges the streams of many instances into one, as Turbine
// does for Hystrix, and serves it with the page: see Aggregate for the merge
// rules. The page divides an aggregated event's per-host keys (window,
// latencies, error %) by its reportingHosts, as the Hystrix Dashboard does,
// and shows the number of hosts on each tile. An aggregate has no control
// endpoint (control each instance's own): NewAggregate refuses a
// Stream.Control rather than ignore it.
package dashboard
