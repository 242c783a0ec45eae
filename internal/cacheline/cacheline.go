// Package cacheline holds the one padding size bulwark uses to keep the
// counters every call writes off the cache lines that other cores read.
package cacheline

// Size is the span over which writes on one core invalidate what another
// core reads (false sharing): two 64-byte lines on amd64, whose adjacent
// line prefetcher fetches lines in pairs. Fields written on every call are
// padded to start and end on such a span.
const Size = 128
