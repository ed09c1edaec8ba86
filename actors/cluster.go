// Cluster mode: the members of one limiter. This file holds what a member
// is (its configuration, its state, its counters), how it joins (Start)
// and leaves (Stop), and what it shows (ClusterStatus). Ownership comes
// from etcd (cluster_etcd.go), is fenced at the owner under the shard's
// lock (cluster_own.go), moves with its buckets (cluster_handoff.go), and
// checks reach their owner in batches (cluster_forward.go).

package actors

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ratelimitd/ratelimitd/actors/internal/peer"
	"github.com/ratelimitd/ratelimitd/table/journal"
)

// FailurePolicy says what a check does when it cannot be decided as it
// should: FailClosed refuses it, FailOpen admits it uncounted. It is the
// type of Config.OnJournalError and ClusterConfig.OnError.
type FailurePolicy = JournalErrorPolicy

// Defaults of a ClusterConfig.
const (
	DefaultClusterName    = "ratelimitd"
	DefaultLease          = 3 * time.Second
	DefaultVShards        = 1024
	DefaultClusterTimeout = time.Second
	DefaultForwardTimeout = 500 * time.Millisecond
	// MaxVShards is the largest ClusterConfig.VShards accepted.
	MaxVShards = 1 << 16
)

// ClusterConfig makes a System a member of a cluster: any member answers
// any check, and each id has one owner at a time (see the package doc,
// Cluster mode). Its zero fields mean the documented defaults.
type ClusterConfig struct {
	// Etcd lists the endpoints of the etcd cluster (such as
	// http://127.0.0.1:2379) that holds the members, their leases and who
	// owns each vshard. Required.
	Etcd []string
	// Listen is the host:port the member serves the other members on
	// (forwarded checks, handoffs); port 0 picks a free one. Required.
	Listen string
	// Advertise is the host:port the other members reach this one at;
	// empty means the address Listen bound, which must then name a host.
	Advertise string
	// Name is the cluster's name, the prefix of its keys in etcd; empty
	// means DefaultClusterName.
	Name string
	// Lease is the TTL of the member's etcd lease (whole seconds; etcd may
	// grant more); 0 means DefaultLease. A member that cannot renew it
	// stops serving before it can have expired at etcd; a crashed member's
	// vshards are served again by the others about Lease later.
	Lease time.Duration
	// VShards is the number of virtual shards ids hash to, fixed for the
	// cluster's life (etcd keeps it): 0 means DefaultVShards; a member
	// started with another number is refused. Config.Shards must divide
	// it (by default it does).
	VShards int
	// OnError says what a check does when no member can decide it within
	// Timeout (its owner unreachable, its vshard without a serving owner,
	// this member's lease lapsed): FailClosed returns
	// ErrClusterUnavailable, FailOpen admits it uncounted.
	OnError FailurePolicy
	// Timeout bounds how long a check waits for its vshard's owner,
	// re-routes included, before OnError applies; 0 means
	// DefaultClusterTimeout.
	Timeout time.Duration
	// ForwardTimeout bounds one forwarded batch, from its taking to its
	// answer (a batch not sent yet is tried again within it, one sent
	// never); 0 means DefaultForwardTimeout.
	ForwardTimeout time.Duration
	// MemberID names this member in etcd; empty means the id kept in
	// Config.DataDir (made at its first start), or a new random one
	// without a data directory. A member that restarts with its id and
	// data directory before its vshards were placed elsewhere resumes them
	// from its journal.
	MemberID string
	// TLS, when set, is used both to serve the other members and to dial
	// them, with mutual TLS 1.3: the member requires of each a client
	// certificate that TLS.ClientCAs verify, and trusts a member whose
	// certificate chains to TLS.RootCAs (or passes TLS.VerifyConnection,
	// with InsecureSkipVerify) and names the host of its advertised
	// address (an IP SAN for an IP address). Its Certificates (or
	// GetCertificate and GetClientCertificate) are presented on both
	// sides; GetConfigForClient may serve a rotated certificate or CA and
	// is held to the same rules. Nil keeps the plain transport, with no
	// encryption and no authentication.
	TLS *tls.Config
	// EtcdTLS, when set, is the TLS config of the etcd client (its
	// Certificates only if etcd requires client certificates), and every
	// Etcd endpoint must be https://; nil requires http:// endpoints.
	EtcdTLS *tls.Config

	// mono, set only by tests, is the monotonic clock of the lease.
	mono func() time.Duration
	// registered, set only by tests, runs when the member has registered
	// again after etcd expired its lease, before it serves again.
	registered func()
}

func (cc ClusterConfig) withDefaults() (ClusterConfig, error) {
	switch {
	case len(cc.Etcd) == 0:
		return cc, fmt.Errorf("%w: Cluster.Etcd lists no endpoint", ErrConfig)
	case cc.Listen == "":
		return cc, fmt.Errorf("%w: Cluster.Listen is empty", ErrConfig)
	case cc.Lease < 0 || cc.Lease%time.Second != 0:
		return cc, fmt.Errorf("%w: Cluster.Lease %v is not a whole number of seconds", ErrConfig, cc.Lease)
	case cc.VShards < 0 || cc.VShards > MaxVShards:
		return cc, fmt.Errorf("%w: Cluster.VShards %d is outside [1, %d]", ErrConfig, cc.VShards, MaxVShards)
	case cc.OnError != FailClosed && cc.OnError != FailOpen:
		return cc, fmt.Errorf("%w: Cluster.OnError %d is not a policy", ErrConfig, cc.OnError)
	case cc.Timeout < 0 || cc.ForwardTimeout < 0:
		return cc, fmt.Errorf("%w: Cluster timeouts must not be negative", ErrConfig)
	case len(cc.MemberID) > 128:
		return cc, fmt.Errorf("%w: Cluster.MemberID is longer than 128 bytes", ErrConfig)
	}
	if cc.TLS != nil {
		if err := peer.CheckTLS(cc.TLS); err != nil {
			return cc, fmt.Errorf("%w: Cluster.TLS: %w", ErrConfig, err)
		}
	}
	for _, e := range cc.Etcd {
		switch https := strings.HasPrefix(e, "https://"); {
		case https && cc.EtcdTLS == nil:
			return cc, fmt.Errorf("%w: Cluster.Etcd endpoint %s is https: set Cluster.EtcdTLS", ErrConfig, e)
		case !https && cc.EtcdTLS != nil:
			return cc, fmt.Errorf("%w: Cluster.EtcdTLS is set, so every Cluster.Etcd endpoint must be https://, not %s", ErrConfig, e)
		}
	}
	if cc.Name == "" {
		cc.Name = DefaultClusterName
	}
	if cc.Lease == 0 {
		cc.Lease = DefaultLease
	}
	if cc.VShards == 0 {
		cc.VShards = DefaultVShards
	}
	if cc.Timeout == 0 {
		cc.Timeout = DefaultClusterTimeout
	}
	if cc.ForwardTimeout == 0 {
		cc.ForwardTimeout = DefaultForwardTimeout
	}
	if cc.mono == nil {
		start := time.Now()
		cc.mono = func() time.Duration { return time.Since(start) }
	}
	return cc, nil
}

// defaultClusterShards is the default Config.Shards of a member: the
// largest divisor of vshards not above 4 × GOMAXPROCS, so that a vshard
// lives on one local shard (v mod Shards).
func defaultClusterShards(vshards int) int {
	for n := min(4*runtime.GOMAXPROCS(0), vshards); n > 1; n-- {
		if vshards%n == 0 {
			return n
		}
	}
	return 1
}

// Errors of cluster mode inside the package: they never reach a caller.
var (
	// errMoved: the vshard is not served here at the caller's epoch; the
	// check was not counted and goes to its owner again.
	errMoved = errors.New("actors: vshard not served here")
	// errLeaseLapsed: this member's lease may have expired; it serves
	// nothing until it is renewed.
	errLeaseLapsed = errors.New("actors: cluster lease lapsed")
	// errNoOwner: no live member owns the vshard yet.
	errNoOwner = errors.New("actors: vshard has no owner")
	// errUnreachable: the owner did not answer a batch in time; its
	// checks may or may not have been counted.
	errUnreachable = errors.New("actors: owner unreachable")
)

// vstate is what a member does with one vshard.
type vstate uint8

const (
	vsNone      vstate = iota // not served here, and no bucket of it held
	vsStale                   // buckets from the journal, its owner not yet known (after a restart)
	vsActive                  // served here at epoch, while the lease holds
	vsMoving                  // served here until a handoff began: fenced, its buckets shipping
	vsReceiving               // buckets arriving in a handoff from `from`
	vsPending                 // a complete copy from `from`, waiting for the move to commit
	vsDropping                // its buckets being deleted
)

var vstateNames = [...]string{"none", "stale", "active", "moving", "receiving", "pending", "dropping"}

func (s vstate) String() string { return vstateNames[s] }

// vshard is the local state of one vshard, guarded by the mu of its shard
// (System.shards[v % Shards]): the fence reads it where checks are decided.
type vshard struct {
	state vstate
	// epoch: vsActive, vsMoving: the epoch (etcd revision) it became ours;
	// vsReceiving, vsPending: the epoch at its sender.
	epoch int64
	from  string        // vsReceiving, vsPending: the sender
	xfer  uint64        // vsReceiving, vsPending: the handoff
	at    time.Duration // vsPending: when (monotonic) the copy was complete
	since time.Time     // vsActive: when it began serving here
	// gone is the epoch at which the vshard last left this member: a
	// view that says it is ours at that epoch or before is out of date.
	gone int64
}

// clusterCounters count what a member did since Start (ClusterStats).
type clusterCounters struct {
	forwardedChecks, forwardedBatches atomic.Int64
	forwardStreams                    atomic.Int64
	batchSizes                        [len(BatchSizeBounds) + 1]atomic.Int64
	receivedChecks, receivedBatches   atomic.Int64
	duplicates                        atomic.Int64
	fenced                            atomic.Int64
	unavailable, admittedOpen         atomic.Int64
	handoffsOut, vshardsIn            atomic.Int64
	handoffFailures                   atomic.Int64
	vshardsOut, bucketsOut            atomic.Int64
	handoffNanos                      atomic.Int64
	takeovers, claims                 atomic.Int64
	ownershipChanges                  atomic.Int64
	etcdErrors                        atomic.Int64
	leaseLapses                       atomic.Int64
	refundsLost                       atomic.Int64
}

// BatchSizeBounds are the upper bounds of the buckets of
// ClusterStats.BatchSizes: checks per forwarded batch.
var BatchSizeBounds = [...]int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}

// cluster is a member: its identity, its lease, its view of etcd, the
// state of every vshard here, and its links to the other members.
type cluster struct {
	s           *System
	cfg         ClusterConfig
	log         *slog.Logger
	id          string
	incarnation uint64 // this process's, so that batch ids never repeat across restarts
	addr        string // advertised
	n           int    // vshards
	mono        func() time.Duration

	// The lease: serving is allowed while mono() < deadline.
	deadline     atomic.Int64 // monotonic ns
	deadlineWall atomic.Int64 // Unix ns of the same instant, for logs and status
	lease        atomic.Int64 // clientv3.LeaseID
	ttl          time.Duration
	lapsed       atomic.Bool // the deadline passed and the lapse was logged

	etcd   *clientv3.Client
	prefix string

	view   atomic.Pointer[view]
	minRev atomic.Int64                  // the latest revision of our own transactions: older views are out of date
	viewMu sync.Mutex                    // serializes publishing
	viewCh atomic.Pointer[chan struct{}] // closed when the view changes

	vs []vshard // by vshard; each guarded by its shard's mu

	ln     net.Listener
	srv    *peer.Server
	links  sync.Map      // member id → *outbox
	linkMu sync.Mutex    // serializes the making of links
	units  atomic.Uint64 // CheckAll units sent, for their ids
	dedup  dedupe

	kick     chan struct{} // wakes the control loop
	ready    chan struct{} // closed after the first reconcile
	leaving  atomic.Bool
	stopCtx  context.Context
	stopAll  context.CancelFunc
	loops    sync.WaitGroup
	serveErr chan error

	closeOnce sync.Once

	hoMu     sync.Mutex
	handoffs map[uint64]*HandoffStatus // in flight, out and in

	stats clusterCounters
}

// newCluster makes the member of s (not yet joined), its vshards stale
// when the data directory may hold buckets.
func newCluster(s *System, cc ClusterConfig) *cluster {
	ctx, cancel := context.WithCancel(context.Background())
	cl := &cluster{
		s:        s,
		cfg:      cc,
		log:      s.cfg.Logger.With("cluster", cc.Name),
		n:        cc.VShards,
		mono:     cc.mono,
		ttl:      cc.Lease,
		prefix:   "/" + cc.Name + "/",
		vs:       make([]vshard, cc.VShards),
		kick:     make(chan struct{}, 1),
		ready:    make(chan struct{}),
		stopCtx:  ctx,
		stopAll:  cancel,
		serveErr: make(chan error, 1),
		handoffs: map[uint64]*HandoffStatus{},
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	cl.incarnation = binary.LittleEndian.Uint64(b[:])
	ch := make(chan struct{})
	cl.viewCh.Store(&ch)
	cl.dedup.init()
	if s.cfg.DataDir != "" {
		for v := range cl.vs {
			cl.vs[v].state = vsStale
		}
	}
	cl.view.Store(newView(cl.n))
	return cl
}

// clusterFile is the member's description of itself in DataDir/CLUSTER:
// its id, so that it stays the same member across restarts, and its last
// lease, so that a restart within the lease keeps it.
type clusterFile struct {
	Format int    `json:"format"`
	Name   string `json:"cluster"`
	Member string `json:"member"`
	Lease  int64  `json:"lease"`
}

const clusterFileName = "CLUSTER"

// identity settles the member id (and the lease to try again) from the
// config, the data directory or chance.
func (cl *cluster) identity() (lease int64, err error) {
	dir := cl.s.cfg.DataDir
	var f clusterFile
	if dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, clusterFileName))
		switch {
		case err == nil:
			if json.Unmarshal(b, &f) != nil || f.Format != 1 || f.Member == "" {
				return 0, fmt.Errorf("%w: %s is not a ratelimitd cluster member description", ErrConfig, filepath.Join(dir, clusterFileName))
			}
			if f.Name != cl.cfg.Name {
				return 0, fmt.Errorf("%w: data directory %s belongs to cluster %q, not %q; start it with that cluster name (or an empty data directory)", ErrConfig, dir, f.Name, cl.cfg.Name)
			}
		case !errors.Is(err, os.ErrNotExist):
			return 0, fmt.Errorf("actors: cluster: %w", err)
		}
	}
	switch {
	case cl.cfg.MemberID != "":
		if f.Member != "" && f.Member != cl.cfg.MemberID {
			f.Lease = 0 // another member's lease
		}
		cl.id = cl.cfg.MemberID
	case f.Member != "":
		cl.id = f.Member
	default:
		var b [8]byte
		_, _ = rand.Read(b[:])
		cl.id = "m-" + hex.EncodeToString(b[:])
	}
	return f.Lease, cl.saveIdentity()
}

// saveIdentity writes DataDir/CLUSTER with the current lease.
func (cl *cluster) saveIdentity() error {
	dir := cl.s.cfg.DataDir
	if dir == "" {
		return nil
	}
	b, _ := json.Marshal(clusterFile{Format: 1, Name: cl.cfg.Name, Member: cl.id, Lease: cl.lease.Load()})
	if err := journal.WriteFileAtomic(dir, clusterFileName, append(b, '\n')); err != nil {
		return fmt.Errorf("actors: cluster: %w", err)
	}
	return nil
}

// join makes the member one of the cluster, within ctx: it serves the
// other members, checks the cluster's vshards in etcd, registers under a
// lease, reads the view, starts the loops, and waits for its first
// reconcile (so that the vshards it owns serve before Start returns).
func (cl *cluster) join(ctx context.Context) error {
	oldLease, err := cl.identity()
	if err != nil {
		return err
	}
	if cl.ln, err = net.Listen("tcp", cl.cfg.Listen); err != nil {
		return fmt.Errorf("actors: cluster: listen: %w", err)
	}
	cl.addr = cl.cfg.Advertise
	if cl.addr == "" {
		host, _, _ := net.SplitHostPort(cl.ln.Addr().String())
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return fmt.Errorf("%w: Cluster.Listen %s binds every interface: set Cluster.Advertise to the address the other members reach this one at", ErrConfig, cl.cfg.Listen)
		}
		cl.addr = cl.ln.Addr().String()
	}
	cl.srv = peer.NewServer(map[string]peer.Handler{
		"Prepare": cl.handlePrepare,
		"Commit":  cl.handleCommit,
		"Abort":   cl.handleAbort,
	}, cl.cfg.TLS)
	cl.srv.HandleStream("Forwards", cl.serveForwards)
	go func() { cl.serveErr <- cl.srv.Serve(cl.ln) }()

	cl.etcd, err = clientv3.New(clientv3.Config{
		Endpoints:   cl.cfg.Etcd,
		DialTimeout: 2 * time.Second,
		TLS:         cl.cfg.EtcdTLS,
		Logger:      zapLogger(cl.log.With("lib", "etcd")),
	})
	if err != nil {
		return fmt.Errorf("actors: cluster: etcd: %w", err)
	}
	if err := cl.checkVShards(ctx); err != nil {
		return err
	}
	if err := cl.register(ctx, oldLease); err != nil {
		return err
	}
	vw, err := cl.load(ctx)
	if err != nil {
		return fmt.Errorf("actors: cluster: read the cluster from etcd: %w", err)
	}
	cl.publish(vw)
	cl.log.Info("cluster joined", "member", cl.id, "addr", cl.addr, "cluster", cl.cfg.Name,
		"vshards", cl.n, "lease_ttl", cl.ttl, "members", len(vw.members), "epoch", vw.rev)
	cl.loops.Add(3)
	go cl.watchLoop(vw.rev)
	go cl.keepAliveLoop()
	go cl.controlLoop()
	select {
	case <-cl.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("actors: cluster: join: %w", ctx.Err())
	}
}

// leave hands every vshard of the member off to the others (its member
// key says leaving, so that no one places vshards on it), within ctx;
// then it revokes its lease, so that what could not be handed off is
// taken over at once.
func (cl *cluster) leave(ctx context.Context) {
	if cl.etcd == nil || cl.lease.Load() == 0 {
		return
	}
	cl.leaving.Store(true)
	start := time.Now()
	if err := cl.putMember(ctx); err != nil {
		cl.log.Warn("cluster leave: cannot mark this member leaving", "err", err)
	}
	cl.poke()
	for {
		owned, target := cl.ownedAndPlaceable()
		if owned == 0 || !target {
			break
		}
		if !cl.leaseValid() {
			cl.log.Warn("cluster leave: the lease lapsed (etcd unreachable?); the vshards left are taken over without their buckets", "vshards", owned)
			break
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			cl.log.Warn("cluster leave: out of time; the vshards left are taken over without their buckets", "vshards", owned)
			break
		}
	}
	owned, _ := cl.ownedAndPlaceable()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if _, err := cl.etcd.Revoke(rctx, clientv3.LeaseID(cl.lease.Load())); err != nil {
		cl.log.Warn("cluster leave: cannot revoke the lease; it expires by itself", "err", err)
	}
	cl.stopServing("leave")
	cl.log.Info("cluster left", "member", cl.id, "vshards_left_behind", owned, "duration", time.Since(start).Round(time.Millisecond))
}

// ownedAndPlaceable counts the vshards still served or moving here, and
// reports whether another member could take them.
func (cl *cluster) ownedAndPlaceable() (owned int, target bool) {
	vw := cl.view.Load()
	for _, m := range vw.members {
		if !m.Leaving {
			target = true
		}
	}
	for v := range cl.vs {
		sh := cl.shardOf(v)
		sh.mu.Lock()
		if st := cl.vs[v].state; st == vsActive || st == vsMoving {
			owned++
		}
		sh.mu.Unlock()
	}
	return owned, target
}

// close stops the loops, the member server, the links and the etcd
// client; what was queued for other members fails.
func (cl *cluster) close(ctx context.Context) {
	cl.closeOnce.Do(func() { cl.shut(ctx) })
}

func (cl *cluster) shut(ctx context.Context) {
	cl.stopAll()
	cl.loops.Wait()
	if cl.srv != nil {
		cl.srv.Stop(ctx)
		if err := <-cl.serveErr; err != nil {
			cl.log.Error("member server failed", "err", err)
		}
	} else if cl.ln != nil {
		_ = cl.ln.Close()
	}
	cl.links.Range(func(_, v any) bool {
		v.(*outbox).close()
		return true
	})
	if cl.etcd != nil {
		_ = cl.etcd.Close()
	}
}

// shardOf returns the local shard of vshard v.
func (cl *cluster) shardOf(v int) *shard { return cl.s.shards[v%len(cl.s.shards)] }

// poke wakes the control loop.
func (cl *cluster) poke() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

// ClusterStatus is what GET /cluster shows: this member, the members and
// their vshards, the epoch and the lease, the handoffs in flight.
type ClusterStatus struct {
	Member        string          `json:"member"`
	Addr          string          `json:"addr"`
	Cluster       string          `json:"cluster"`
	Epoch         int64           `json:"epoch"` // the etcd revision of this member's view
	VShards       int             `json:"vshards"`
	Serving       int             `json:"serving"` // vshards served here now
	LeaseTTL      time.Duration   `json:"lease_ttl_ns"`
	LeaseDeadline time.Time       `json:"lease_deadline"` // serving stops then unless the lease is renewed
	LeaseValid    bool            `json:"lease_valid"`
	Leaving       bool            `json:"leaving"`
	Members       []MemberStatus  `json:"members"`
	Unowned       int             `json:"unowned"` // vshards no live member owns
	Handoffs      []HandoffStatus `json:"handoffs"`
	Stats         ClusterStats    `json:"stats"`
}

// MemberStatus is one member as the view shows it.
type MemberStatus struct {
	ID      string `json:"id"`
	Addr    string `json:"addr"`
	Leaving bool   `json:"leaving"`
	VShards int    `json:"vshards"` // owned, by etcd
	Placed  int    `json:"placed"`  // where placement wants them
}

// HandoffStatus is a handoff in flight.
type HandoffStatus struct {
	ID      uint64    `json:"id"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	VShards int       `json:"vshards"`
	Since   time.Time `json:"since"`
}

// ClusterStats counts what a member did since Start.
type ClusterStats struct {
	ForwardedChecks  int64 `json:"forwarded_checks"`  // sent to their owners
	ForwardedBatches int64 `json:"forwarded_batches"` // the batches that carried them
	ForwardStreams   int64 `json:"forward_streams"`   // streams opened to other members to carry them
	// BatchSizes counts forwarded batches by checks, bucketed by
	// BatchSizeBounds (the last bucket: above the last bound).
	BatchSizes       []int64       `json:"batch_sizes"`
	ReceivedChecks   int64         `json:"received_checks"` // forwarded here
	ReceivedBatches  int64         `json:"received_batches"`
	Duplicates       int64         `json:"duplicates"`        // batches received again, answered from the reply kept
	Fenced           int64         `json:"fenced"`            // checks refused here, not counted: vshard not served here at their epoch
	Unavailable      int64         `json:"unavailable"`       // checks answered ErrClusterUnavailable
	AdmittedOpen     int64         `json:"admitted_open"`     // checks admitted uncounted (OnError FailOpen)
	HandoffsOut      int64         `json:"handoffs_out"`      // handoffs committed, from here
	VShardsIn        int64         `json:"vshards_in"`        // vshards that came here in a handoff, with their buckets
	HandoffFailures  int64         `json:"handoff_failures"`  // handoffs from here that did not commit
	VShardsOut       int64         `json:"vshards_out"`       // vshards handed off from here
	BucketsOut       int64         `json:"buckets_out"`       // buckets they carried
	HandoffTime      time.Duration `json:"handoff_time_ns"`   // spent fencing to commit, summed
	Takeovers        int64         `json:"takeovers"`         // vshards taken from a member whose lease expired
	Claims           int64         `json:"claims"`            // vshards no one had owned
	OwnershipChanges int64         `json:"ownership_changes"` // vshards that began or stopped serving here
	EtcdErrors       int64         `json:"etcd_errors"`       // failed etcd requests
	LeaseLapses      int64         `json:"lease_lapses"`      // times the lease deadline passed unrenewed
	RefundsLost      int64         `json:"refunds_lost"`      // CheckAll refunds never acknowledged
}

// ClusterStatus returns the member's status; ok is false without cluster mode.
func (s *System) ClusterStatus() (st ClusterStatus, ok bool) {
	cl := s.cl
	if cl == nil {
		return ClusterStatus{}, false
	}
	vw := cl.view.Load()
	st = ClusterStatus{
		Member: cl.id, Addr: cl.addr, Cluster: cl.cfg.Name, Epoch: vw.rev, VShards: cl.n,
		LeaseTTL: cl.ttl, LeaseValid: cl.leaseValid(), Leaving: cl.leaving.Load(),
		Stats: cl.counters(),
	}
	if d := cl.deadlineWall.Load(); d != 0 {
		st.LeaseDeadline = time.Unix(0, d)
	}
	owned := map[string]int{}
	for v := range cl.n {
		o := vw.owners[v]
		if _, live := vw.members[o]; !live {
			st.Unowned++
		}
		owned[o]++
	}
	placed := map[string]int{}
	for v := range cl.n {
		placed[vw.desired.of(v)]++
	}
	for _, id := range vw.ids() {
		m := vw.members[id]
		st.Members = append(st.Members, MemberStatus{ID: id, Addr: m.Addr, Leaving: m.Leaving, VShards: owned[id], Placed: placed[id]})
	}
	for v := range cl.vs {
		sh := cl.shardOf(v)
		sh.mu.Lock()
		if cl.vs[v].state == vsActive {
			st.Serving++
		}
		sh.mu.Unlock()
	}
	cl.hoMu.Lock()
	for _, h := range cl.handoffs {
		st.Handoffs = append(st.Handoffs, *h)
	}
	cl.hoMu.Unlock()
	return st, true
}

func (cl *cluster) counters() ClusterStats {
	c := &cl.stats
	st := ClusterStats{
		ForwardedChecks: c.forwardedChecks.Load(), ForwardedBatches: c.forwardedBatches.Load(), ForwardStreams: c.forwardStreams.Load(),
		ReceivedChecks: c.receivedChecks.Load(), ReceivedBatches: c.receivedBatches.Load(),
		Duplicates: c.duplicates.Load(), Fenced: c.fenced.Load(),
		Unavailable: c.unavailable.Load(), AdmittedOpen: c.admittedOpen.Load(),
		HandoffsOut: c.handoffsOut.Load(), VShardsIn: c.vshardsIn.Load(), HandoffFailures: c.handoffFailures.Load(),
		VShardsOut: c.vshardsOut.Load(), BucketsOut: c.bucketsOut.Load(), HandoffTime: time.Duration(c.handoffNanos.Load()),
		Takeovers: c.takeovers.Load(), Claims: c.claims.Load(), OwnershipChanges: c.ownershipChanges.Load(),
		EtcdErrors: c.etcdErrors.Load(), LeaseLapses: c.leaseLapses.Load(), RefundsLost: c.refundsLost.Load(),
	}
	st.BatchSizes = make([]int64, len(c.batchSizes))
	for i := range c.batchSizes {
		st.BatchSizes[i] = c.batchSizes[i].Load()
	}
	return st
}

// countBatch counts a forwarded batch of n checks.
func (cl *cluster) countBatch(n int) {
	cl.stats.forwardedBatches.Add(1)
	cl.stats.forwardedChecks.Add(int64(n))
	i := 0
	for i < len(BatchSizeBounds) && int64(n) > BatchSizeBounds[i] {
		i++
	}
	cl.stats.batchSizes[i].Add(1)
}
