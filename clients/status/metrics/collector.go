// Package metrics serves a training client's status over HTTP for
// --metrics-local-port: Prometheus text at /metrics, the status.Snapshot as
// JSON at /status, and /healthz.
package metrics

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/psyche-go/psyche/clients/status"
)

// collector derives every metric from one Snapshot per scrape, so the
// figures of a scrape are mutually consistent.
type collector struct {
	rec *status.Recorder

	runInfo, epoch, round, step, clientsInEpoch, clientsHealthy  *prometheus.Desc
	peers, peerIn, peerOut, peerLatency                          *prometheus.Desc
	trainLoss, lastStep, heldOutLoss, heldOutStep                *prometheus.Desc
	tokensPerSec, stepSeconds, stepSent, stepReceived, stepDense *prometheus.Desc
	compression                                                  *prometheus.Desc
	stepsTotal, tokensTotal, sentTotal, receivedTotal            *prometheus.Desc
	warnings, errors, checkpointStep, updated                    *prometheus.Desc
	// Verification (present once the client set it).
	commits, commitVerdicts, unjudged, replays, replayVerdicts, posted *prometheus.Desc
	disputesOpen, disputesSettled, burned, unvested, hasFault          *prometheus.Desc
}

func newCollector(rec *status.Recorder) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("psyche_"+name, help, labels, nil)
	}
	return &collector{
		rec:            rec,
		runInfo:        d("run_info", "Always 1; labels carry the run id, the Coordinator's run state and this client's role this round.", "run_id", "run_state", "role"),
		epoch:          d("epoch", "Coordinator epoch."),
		round:          d("round", "Coordinator round within the epoch."),
		step:           d("step", "Coordinator step."),
		clientsInEpoch: d("clients_in_epoch", "Clients taking part in the current epoch."),
		clientsHealthy: d("clients_healthy", "Clients of the epoch considered healthy."),
		peers:          d("p2p_peers", "P2P peers this client knows."),
		peerIn:         d("p2p_peer_received_bytes_total", "Bytes received from a peer.", "peer"),
		peerOut:        d("p2p_peer_sent_bytes_total", "Bytes sent to a peer.", "peer"),
		peerLatency:    d("p2p_peer_latency_seconds", "Round-trip latency to a peer, where known.", "peer"),
		trainLoss:      d("train_loss", "Train loss of the latest step."),
		lastStep:       d("trained_step", "Latest step this client trained."),
		heldOutLoss:    d("held_out_loss", "Latest held-out loss."),
		heldOutStep:    d("held_out_loss_step", "Step at which the latest held-out loss was measured."),
		tokensPerSec:   d("tokens_per_second", "Training throughput of the latest step."),
		stepSeconds:    d("step_duration_seconds", "Duration of the latest step."),
		stepSent:       d("step_sent_bytes", "Update bytes sent for the latest step."),
		stepReceived:   d("step_received_bytes", "Update bytes received for the latest step."),
		stepDense:      d("step_dense_fp32_bytes", "Size of one step's update as dense fp32 gradients."),
		compression:    d("compression_ratio", "Dense fp32 bytes over bytes sent, for the latest step."),
		stepsTotal:     d("steps_total", "Steps trained."),
		tokensTotal:    d("tokens_total", "Tokens trained on."),
		sentTotal:      d("sent_bytes_total", "Update bytes sent."),
		receivedTotal:  d("received_bytes_total", "Update bytes received."),
		warnings:       d("log_warnings_total", "Warning lines logged."),
		errors:         d("log_errors_total", "Error lines logged."),
		checkpointStep: d("checkpoint_step", "Step of the latest checkpoint."),
		updated:        d("status_updated_timestamp_seconds", "Unix time of the latest status change."),

		commits:         d("verification_commitments_total", "Commitments this client made to its steps."),
		commitVerdicts:  d("verification_commitment_verdicts_total", "This client's commitments by the verdict the chain holds.", "verdict"),
		unjudged:        d("verification_commitments_unjudged", "This client's commitments without a verdict (not sampled, or not judged yet)."),
		replays:         d("verification_replays_total", "Contributions this client replayed as a verifier."),
		replayVerdicts:  d("verification_replay_verdicts_total", "This client's replays by its verdict.", "verdict"),
		posted:          d("verification_verdicts_posted_total", "Verdicts this client posted on chain."),
		disputesOpen:    d("verification_disputes_open", "Open disputes involving this client."),
		disputesSettled: d("verification_disputes_settled_total", "Settled disputes involving this client, by outcome.", "outcome"),
		burned:          d("verification_burned_points", "Reward points of this client burned by faults."),
		unvested:        d("verification_unvested_points", "Reward points of this client still vesting."),
		hasFault:        d("verification_has_fault", "1 if this client was ever found at fault."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.rec.Snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge(c.runInfo, 1, label(s.RunID), label(s.RunState), label(string(s.Role)))
	gauge(c.epoch, float64(s.Epoch))
	gauge(c.round, float64(s.Round))
	gauge(c.step, float64(s.Step))
	gauge(c.clientsInEpoch, float64(s.ClientsInEpoch))
	gauge(c.clientsHealthy, float64(s.ClientsHealthy))
	gauge(c.peers, float64(s.PeerCount))
	for _, p := range s.Peers {
		id := label(p.ID)
		counter(c.peerIn, float64(p.BytesIn), id)
		counter(c.peerOut, float64(p.BytesOut), id)
		if p.Latency > 0 {
			gauge(c.peerLatency, p.Latency.Seconds(), id)
		}
	}
	// Per-step figures are left out until known rather than reported as 0.
	if st, ok := s.LastStep(); ok {
		gauge(c.trainLoss, float64(st.Loss))
		gauge(c.lastStep, float64(st.Step))
		gauge(c.stepSeconds, st.Duration.Seconds())
		gauge(c.stepSent, float64(st.BytesOut))
		gauge(c.stepReceived, float64(st.BytesIn))
		if tps := st.TokensPerSecond(); tps > 0 {
			gauge(c.tokensPerSec, tps)
		}
		if r := status.CompressionRatio(s.DenseBytes, st.BytesOut); r > 0 {
			gauge(c.compression, r)
		}
	}
	if h, ok := s.LastHeldOut(); ok {
		gauge(c.heldOutLoss, float64(h.Loss))
		gauge(c.heldOutStep, float64(h.Step))
	}
	if s.DenseBytes > 0 {
		gauge(c.stepDense, float64(s.DenseBytes))
	}
	counter(c.stepsTotal, float64(s.StepsTotal))
	counter(c.tokensTotal, float64(s.TokensTotal))
	counter(c.sentTotal, float64(s.BytesOutTotal))
	counter(c.receivedTotal, float64(s.BytesInTotal))
	counter(c.warnings, float64(s.WarningsTotal))
	counter(c.errors, float64(s.ErrorsTotal))
	if s.Checkpoint != nil {
		gauge(c.checkpointStep, float64(s.Checkpoint.Step))
	}
	gauge(c.updated, float64(s.Updated.UnixNano())/1e9)
	if v := s.Verification; v != nil {
		cm, r, d := v.Commitments, v.Replays, v.Disputes
		counter(c.commits, float64(cm.Committed))
		counter(c.commitVerdicts, float64(cm.Match), "match")
		counter(c.commitVerdicts, float64(cm.Mismatch), "mismatch")
		counter(c.commitVerdicts, float64(cm.NoData), "no_data")
		gauge(c.unjudged, float64(cm.Unjudged))
		counter(c.replays, float64(r.Run))
		counter(c.replayVerdicts, float64(r.Match), "match")
		counter(c.replayVerdicts, float64(r.Mismatch), "mismatch")
		counter(c.replayVerdicts, float64(r.NoData), "no_data")
		counter(c.posted, float64(r.Posted))
		gauge(c.disputesOpen, float64(d.Open))
		counter(c.disputesSettled, float64(d.Transient), "transient")
		counter(c.disputesSettled, float64(d.TrainerFault), "trainer_fault")
		counter(c.disputesSettled, float64(d.AccuserFault), "accuser_fault")
		counter(c.disputesSettled, float64(d.Unresolved), "unresolved")
		counter(c.disputesSettled, float64(d.Refuted), "refuted")
		gauge(c.burned, float64(v.Burned))
		var unvested float64
		for _, u := range v.Unvested {
			unvested += float64(u)
		}
		gauge(c.unvested, unvested)
		gauge(c.hasFault, boolValue(v.HasFault))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// label makes v a valid label value (Prometheus requires UTF-8).
func label(v string) string { return strings.ToValidUTF8(v, "\uFFFD") }
