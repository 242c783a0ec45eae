package grpcguard

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A call in a Thread group may outlive its caller: at the deadline the
// caller is answered while the call goes on detached in its worker. Such a
// call must never touch memory the caller owns, so it works on copies:
// the request is cloned before Execute, each attempt unmarshals into a
// reply of its own and fills call options of its own, and those are copied
// into the caller's reply and options only after Execute has returned the
// attempt's answer.

// received is what grpc hands to one attempt's Header, Trailer and Peer
// call options.
type received struct {
	header, trailer metadata.MD
	peer            peer.Peer
}

// sinks are a caller's Header, Trailer and Peer call options: where grpc
// writes the call's metadata and peer when it ends.
type sinks struct {
	headers, trailers []*metadata.MD
	peers             []*peer.Peer
}

// splitOptions returns a copy of opts less its Header, Trailer and Peer
// options, and those options.
func splitOptions(opts []grpc.CallOption) ([]grpc.CallOption, sinks) {
	var s sinks
	rest := make([]grpc.CallOption, 0, len(opts))
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			s.headers = append(s.headers, o.HeaderAddr)
		case *grpc.HeaderCallOption:
			s.headers = append(s.headers, o.HeaderAddr)
		case grpc.TrailerCallOption:
			s.trailers = append(s.trailers, o.TrailerAddr)
		case *grpc.TrailerCallOption:
			s.trailers = append(s.trailers, o.TrailerAddr)
		case grpc.PeerCallOption:
			s.peers = append(s.peers, o.PeerAddr)
		case *grpc.PeerCallOption:
			s.peers = append(s.peers, o.PeerAddr)
		default:
			rest = append(rest, o)
		}
	}
	return rest, s
}

// has reports whether the caller passed any Header, Trailer or Peer option.
func (s *sinks) has() bool { return len(s.headers)+len(s.trailers)+len(s.peers) > 0 }

// options returns the call options of one attempt: rest (never modified)
// and the attempt's own Header and Peer options, when the caller has such
// options, and Trailer option (always: the pushback is read from it).
func (s *sinks) options(rest []grpc.CallOption, r *received) []grpc.CallOption {
	opts := append(rest[:len(rest):len(rest)], grpc.Trailer(&r.trailer))
	if len(s.headers) > 0 {
		opts = append(opts, grpc.Header(&r.header))
	}
	if len(s.peers) > 0 {
		opts = append(opts, grpc.Peer(&r.peer))
	}
	return opts
}

// deliver copies what an attempt received into the caller's options, as
// grpc would have written them (the peer only if the call had one).
func (s *sinks) deliver(r *received) {
	for _, h := range s.headers {
		*h = r.header
	}
	for _, t := range s.trailers {
		*t = r.trailer
	}
	if r.peer.Addr != nil || r.peer.LocalAddr != nil {
		for _, p := range s.peers {
			*p = r.peer
		}
	}
}

// cloneMessage returns a deep copy of m, a request, for a call in a Thread
// group; what names m in the error.
func cloneMessage(what string, m any) (proto.Message, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, notProto(what, m)
	}
	return proto.Clone(pm), nil
}

// emptyLike returns a new empty message of m's type.
func emptyLike(m proto.Message) proto.Message { return m.ProtoReflect().New().Interface() }

// copyMessage makes dst a copy of src, a message of the same type, as
// unmarshalling into dst would have made it.
func copyMessage(dst, src proto.Message) {
	proto.Reset(dst)
	proto.Merge(dst, src)
}

// notProto is the error of a call in a Thread group whose request or reply
// is not a proto.Message: such a call cannot get copies of its own.
func notProto(what string, m any) error {
	err := fmt.Errorf("grpcguard: a call in a Thread group works on copies of its messages, but its %s, a %T, is not a proto.Message: use a Semaphore group", what, m)
	return &statusError{st: status.New(codes.Internal, err.Error()), err: err}
}
