package server

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/acds-project/acds"
	"github.com/acds-project/acds/store"
)

// metricsStoreTimeout bounds the store query a scrape makes for the queue
// gauges, so a slow database cannot hold a scrape (or pile them up).
const metricsStoreTimeout = 2 * time.Second

// metrics are the server's Prometheus collectors (DESIGN §11). Every label
// value comes from a fixed set the server defines — route patterns,
// methods, status codes, kinds, problem codes, supported system types —
// never from a token, a pseudonym, a portal host or a request's content.
type metrics struct {
	registry *prometheus.Registry
	own      []prometheus.Collector // registered by newMetrics; unregistered by Close
	log      *slog.Logger

	requests    *prometheus.CounterVec   // endpoint, method, code
	latency     *prometheus.HistogramVec // endpoint, method
	ended       *prometheus.CounterVec   // kind, status, problem
	fetches     *prometheus.CounterVec   // system_type, outcome
	sessions    prometheus.Counter       // notarized TLS sessions of completed fetches
	busy        atomic.Int64             // workers running an attempt
	workers     int
	attempts    *prometheus.HistogramVec // kind
	storeErrors prometheus.Counter
}

// newMetrics registers the server's collectors with reg (a new registry
// with the Go runtime and process collectors when reg is nil).
func newMetrics(s *Server, reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
	}
	m := &metrics{
		registry: reg,
		log:      s.log,
		workers:  max(s.cfg.Workers, 0),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acds_http_requests_total",
			Help: "HTTP requests answered, by endpoint (route pattern), method and status code (\"aborted\" when the handler aborted and the connection was closed, e.g. a stalled upload cut by the body timeout).",
		}, []string{"endpoint", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "acds_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by endpoint (route pattern) and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"endpoint", "method"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acds_requests_ended_total",
			Help: "Requests this server's workers ended (the outcome is stored), by kind, status and problem code (\"\" when completed).",
		}, []string{"kind", "status", "problem"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "acds_fetch_outcomes_total",
			Help: "Portal fetches, by systemType and outcome (\"ok\" or the problem code).",
		}, []string{"system_type", "outcome"}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acds_notary_sessions_total",
			Help: "Notarized TLS sessions of successful portal fetches.",
		}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "acds_attempt_duration_seconds",
			Help:    "Time a worker spent on one attempt, by kind.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"kind"}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "acds_metrics_store_errors_total",
			Help: "Scrapes whose queue query to the store failed or timed out.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.ended, m.fetches, m.sessions, m.attempts, m.storeErrors,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "acds_workers",
			Help: "Workers of this server.",
		}, func() float64 { return float64(m.workers) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "acds_workers_busy",
			Help: "Workers of this server running an attempt now (utilisation: busy / workers).",
		}, func() float64 { return float64(m.busy.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "acds_enclave_up",
			Help: "1 when the server has an enclave to attest with, else 0.",
		}, func() float64 { return b2f(s.cfg.Enclave != nil) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "acds_fetcher_up",
			Help: "1 when the server can fetch from portals (a Fetcher, and through it a notary), else 0.",
		}, func() float64 { return b2f(s.cfg.Fetcher != nil) }),
		&queueCollector{s: s, m: m},
	} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, err
		}
		m.own = append(m.own, c)
	}
	return m, nil
}

// unregister takes the server's collectors off its registry, so that a
// closed server no longer reports and a new one can register on the same
// registry.
func (m *metrics) unregister() {
	for _, c := range m.own {
		m.registry.Unregister(c)
	}
	m.own = nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// instrument counts and times every request h answers, labelled with the
// route pattern the mux matched (r.Pattern, set by http.ServeMux on the
// request it was given), or "other" when none matched. A request whose
// handler panicked (http.ErrAbortHandler, e.g. a stalled upload cut by
// the body timeout) got no complete answer, as net/http closes the
// connection: it counts under code "aborted", not a status the client
// may never have received (the 200 net/http sends for a handler that
// wrote nothing), and is logged with its endpoint only.
func (m *metrics) instrument(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		returned := false // false in the deferred call: h panicked
		defer func() {
			endpoint := r.Pattern
			if endpoint == "" || endpoint == "/" {
				endpoint = "other"
			}
			method := r.Method
			switch method {
			case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete:
			default:
				method = "other"
			}
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			label := strconv.Itoa(code)
			if !returned {
				label = "aborted"
				m.log.Info("request aborted; the connection was closed without an answer", "endpoint", endpoint)
			}
			m.requests.WithLabelValues(endpoint, method, label).Inc()
			m.latency.WithLabelValues(endpoint, method).Observe(time.Since(start).Seconds())
		}()
		h.ServeHTTP(sw, r)
		returned = true
	})
}

// handler serves the registry in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
}

// fetchOutcome records one portal fetch's outcome. systemType was checked
// against the supported ones at acceptance; anything else is "other".
func (m *metrics) fetchOutcome(systemType, outcome string, sessions int) {
	if !isSupportedSystem(systemType) {
		systemType = "other"
	}
	m.fetches.WithLabelValues(systemType, outcome).Inc()
	m.sessions.Add(float64(sessions))
}

func isSupportedSystem(t string) bool {
	for _, s := range acds.SystemTypes() {
		if s == t {
			return true
		}
	}
	return false
}

// statusWriter remembers the status code written through it. It passes
// Flush and the http.ResponseController methods through (Unwrap).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on, for long-polling and streaming answers.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// queueCollector reports the store's queue at scrape time: the number of
// requests processing and the age of the oldest, when the Store implements
// store.QueueStatter. A failed or slow query reports nothing for them and
// counts in acds_metrics_store_errors_total, so the scrape still answers.
type queueCollector struct {
	s *Server
	m *metrics
}

var (
	queueDepthDesc = prometheus.NewDesc("acds_queue_depth",
		"Requests in the store not yet completed or failed (queued or running, all replicas).", nil, nil)
	queueAgeDesc = prometheus.NewDesc("acds_queue_oldest_age_seconds",
		"Age of the oldest request not yet completed or failed (0 when there is none).", nil, nil)
)

// Describe implements prometheus.Collector.
func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queueAgeDesc
}

// Collect implements prometheus.Collector.
func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok := q.s.st.Store.(store.QueueStatter) // the Store as configured, not its deadline wrapper
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(metricsStoreTimeout, q.s.st.timeout))
	defer cancel()
	stats, err := st.QueueStats(ctx)
	q.s.st.health.observe(context.Background(), err)
	if err != nil {
		q.m.storeErrors.Inc()
		return
	}
	age := 0.0
	if !stats.Oldest.IsZero() {
		age = max(q.s.cfg.Now().Sub(stats.Oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(stats.Processing))
	ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, age)
}
