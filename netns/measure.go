package netns

import (
	"fmt"
	"maps"
	"math"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/proxysim/proxysim/sim/iptables"
	"github.com/proxysim/proxysim/sim/route"
)

// Significance is the p-value below which a spread of real connections
// is taken to disagree with the shares it was predicted to have.
const Significance = 0.001

// Measurement is where count real connections went, against the shares a
// tracer predicted for them. Outcomes are in the words a client sees: an
// endpoint's "ip:port", OutcomeRefused for REJECT, OutcomeTimeout for
// DROP; an ACCEPT (delivered unchanged) is the destination answering.
type Measurement struct {
	Protocol, From, To string
	// Predicted is each outcome's share; Counts what the kernel did.
	Predicted map[string]float64
	Counts    map[string]int
	N         int
	// Pairs says each of the N trials was two connections of the client,
	// its outcome "FIRST -> SECOND".
	Pairs bool
	// Stat is Pearson's chi-square statistic over the predicted outcomes,
	// with DF degrees of freedom, and P its p-value; DF is 0 when one
	// outcome is certain, which is then checked exactly.
	Stat float64
	DF   int
	P    float64
	// PredictedMasq is, when the tracer tells masquerade, the part of each
	// outcome's connections predicted to reach the endpoint from another
	// source than the client's (masqueraded); Masqueraded counts those the
	// endpoint saw so. Nil when masquerade is not checked.
	PredictedMasq map[string]float64
	Masqueraded   map[string]int
	// Skipped says why nothing was measured (too many outcomes to sample).
	Skipped string
	// First is the sample that was off at Significance when a second
	// one was taken (see MeasureWith); nil when one sample sufficed.
	First *Measurement
}

// Agrees is nil when the kernel did what was predicted: every connection
// went to the one certain outcome, or the spread is consistent with the
// shares at Significance and nothing unpredicted happened. For a spread
// measured twice (First set) the second sample decides.
func (m Measurement) Agrees() error {
	if m.Skipped != "" {
		return nil
	}
	unexpected := m.unpredicted()
	switch {
	case len(unexpected) > 0:
		return fmt.Errorf("%s: unpredicted outcomes %s", m, strings.Join(unexpected, ", "))
	case m.DF > 0 && m.P < Significance:
		return fmt.Errorf("%s: the spread is off (p < %g)", m, Significance)
	}
	if off := m.masqueradeOff(); len(off) > 0 {
		return fmt.Errorf("%s: masquerade is off: %s", m, strings.Join(off, ", "))
	}
	return nil
}

// masqueradeOff lists the outcomes whose connections were masqueraded
// otherwise than predicted. The IPVS tracer's masquerade is all or nothing
// per outcome (the rules decide on the client and the endpoint alone): a
// part predicted strictly between 0 and 1 is not judged.
func (m Measurement) masqueradeOff() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m.PredictedMasq)) {
		c, got, want := m.Counts[k], m.Masqueraded[k], m.PredictedMasq[k]
		switch {
		case c == 0:
		case want == 0 && got > 0:
			out = append(out, fmt.Sprintf("%s: %d of %d masqueraded, predicted none", k, got, c))
		case want == 1 && got < c:
			out = append(out, fmt.Sprintf("%s: %d of %d masqueraded, predicted all", k, got, c))
		}
	}
	return out
}

// unpredicted lists the outcomes seen that the prediction did not have.
func (m Measurement) unpredicted() []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m.Counts)) {
		if _, ok := m.Predicted[k]; !ok {
			out = append(out, fmt.Sprintf("%s ×%d", k, m.Counts[k]))
		}
	}
	return out
}

// unpredictedIfAny is unpredicted of a measurement that may be nil.
func (m *Measurement) unpredictedIfAny() []string {
	if m == nil {
		return nil
	}
	return m.unpredicted()
}

// strayTimeouts reports whether the only outcomes the prediction lacks are
// timeouts (a pair with one counts), at most a tenth of the trials.
func (m Measurement) strayTimeouts() bool {
	stray := 0
	for k, c := range m.Counts {
		if _, ok := m.Predicted[k]; ok {
			continue
		}
		if !strings.Contains(k, OutcomeTimeout) {
			return false
		}
		stray += c
	}
	return stray > 0 && stray*10 <= m.N
}

func (m Measurement) String() string {
	if m.Skipped != "" {
		return fmt.Sprintf("%s %s -> %s: not measured (%s)", m.Protocol, m.From, m.To, m.Skipped)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m.Predicted)) {
		parts = append(parts, fmt.Sprintf("%s %d (expected %.1f)", k, m.Counts[k], m.Predicted[k]*float64(m.N)))
	}
	trials := "connections"
	if m.Pairs {
		trials = "pairs of connections"
	}
	s := fmt.Sprintf("%s %s -> %s, %d %s: %s", m.Protocol, m.From, m.To, m.N, trials, strings.Join(parts, ", "))
	if m.DF > 0 {
		s += fmt.Sprintf("; chi-square %.3f, df %d, p %.3f", m.Stat, m.DF, m.P)
	}
	if m.PredictedMasq != nil {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m.PredictedMasq)) {
			if m.Counts[k] > 0 && (m.PredictedMasq[k] > 0 || m.Masqueraded[k] > 0) {
				parts = append(parts, fmt.Sprintf("%s %d/%d (predicted %g)", k, m.Masqueraded[k], m.Counts[k], m.PredictedMasq[k]))
			}
		}
		if len(parts) == 0 {
			parts = []string{"none, as predicted"}
		}
		s += "; masqueraded: " + strings.Join(parts, ", ")
	}
	if u := m.First.unpredictedIfAny(); len(u) > 0 {
		s += fmt.Sprintf(" (a second sample: the first had %s)", strings.Join(u, ", "))
	} else if m.First != nil {
		s += fmt.Sprintf(" (a second sample: the first was off, chi-square %.3f, p %.4f)", m.First.Stat, m.First.P)
	}
	return s
}

// Sample sizes: a certain outcome is checked with exactSamples connections
// (all must go there); shares below 1 with samplesPerOutcome per outcome
// (serialPerOutcome when each trial must start from a prepared affinity
// state, so that trials run one at a time: half the connections, still
// twice minExpected), and enough that the rarest expects minExpected; more
// outcomes than maxOutcomes are not measured.
const (
	exactSamples      = 16
	samplesPerOutcome = 200
	serialPerOutcome  = 100
	minExpected       = 50
	maxSamples        = 5000
	maxOutcomes       = 16
)

// Measure sends real connections as the packet describes (from its
// source, to its destination) and counts where they went, with every
// predicted endpoint served. Each connection of a spread starts with no
// affinity history, which is what the tracer assumes. The error is about running
// the measurement; whether the kernel agreed is Measurement.Agrees.
func (n *IPTablesNode) Measure(pkt iptables.Packet, predicted iptables.Shares) (Measurement, error) {
	return n.MeasureWith(pkt, predicted, nil)
}

// MeasureWith is Measure for a tracer that knew the clients' history:
// before each connection the node's `recent` lists are set to affinity
// (list name -> client addresses, see SetAffinity), so the kernel starts
// every connection from the history the prediction assumed. A nil
// affinity is no history.
func (n *IPTablesNode) MeasureWith(pkt iptables.Packet, predicted iptables.Shares, affinity map[string][]string) (Measurement, error) {
	// Without history, affinity can only bend a spread: a certain outcome
	// needs no forgetting, and runs its connections (timeouts included)
	// at once.
	var t trial
	switch {
	case len(affinity) > 0:
		t.prepare = func() error { return n.SetAffinity(affinity) }
	case len(predicted) > 1 && n.HasAffinityLists():
		t.prepare = n.ForgetAffinity
	}
	return n.measure(pkt, predicted, t)
}

// SameAddress is why a route from an address to itself is not measured.
const SameAddress = "the client's address is the destination's: its connections would stay in its own namespace"

// measure is a measurement whose trials run as t says: with t.again the
// predicted outcomes are pairs "FIRST -> SECOND" (see trial).
func (n *ProxyNode) measure(pkt route.Packet, predicted route.Shares, t trial) (Measurement, error) {
	to := net.JoinHostPort(pkt.Dst.String(), strconv.Itoa(pkt.DPort))
	m := Measurement{Protocol: strings.ToUpper(pkt.Protocol), From: pkt.Src.String(), To: to, Predicted: map[string]float64{}, Pairs: t.again}
	if m.Protocol == "" {
		m.Protocol = "TCP"
	}
	switch {
	case m.Protocol != "TCP" && m.Protocol != "UDP":
		m.Skipped = "only TCP and UDP connections are sent"
		return m, nil
	case len(predicted) > maxOutcomes:
		m.Skipped = fmt.Sprintf("%d outcomes, more than %d", len(predicted), maxOutcomes)
		return m, nil
	case pkt.Src.Equal(pkt.Dst) && !n.isNodeIP(pkt.Src):
		m.Skipped = SameAddress
		return m, nil
	}
	rarest := 1.0
	for _, k := range predicted.Keys() {
		share, _ := predicted[k].Float64()
		parts := []string{k}
		if t.again {
			first, second, ok := strings.Cut(k, " -> ")
			if !ok {
				return m, fmt.Errorf("outcome %q is not a pair FIRST -> SECOND", k)
			}
			parts = []string{first, second}
		}
		for i, p := range parts {
			parts[i] = seenAs(p, to)
			if parts[i] != OutcomeRefused && parts[i] != OutcomeTimeout {
				if err := n.Serve(m.Protocol, parts[i]); err != nil {
					return m, err
				}
			}
		}
		m.Predicted[strings.Join(parts, " -> ")] += share
		rarest = min(rarest, share)
		if t.masq != nil {
			if m.PredictedMasq == nil {
				m.PredictedMasq = map[string]float64{}
			}
			part := 0.0
			if w := t.masq[k]; w != nil {
				part, _ = new(big.Rat).Quo(w, predicted[k]).Float64()
			}
			m.PredictedMasq[strings.Join(parts, " -> ")] = part
		}
	}
	m.N = exactSamples
	if len(m.Predicted) > 1 {
		per := samplesPerOutcome
		if t.prepare != nil || t.again {
			per = serialPerOutcome
		}
		if n.PerOutcome > 0 {
			per = n.PerOutcome
		}
		m.N = min(maxSamples, max(per*len(m.Predicted), int(math.Ceil(minExpected/rarest))))
	}
	if err := m.sample(n, to, t); err != nil {
		return m, err
	}
	// A right prediction still fails one sample in 1/Significance by
	// chance, and a suite measures hundreds of spreads. So a spread that is
	// off, with no unpredicted outcome, is measured once more from fresh
	// connections and judged on that second sample alone: a false alarm
	// then needs two independent unlucky samples (Significance squared),
	// while a wrong prediction, which every sample contradicts, still
	// fails (the e2e suites keep a case that proves it).
	// Likewise a sample whose only surprise is a few timeouts, where no
	// DROP was predicted: a machine busy enough loses a connection past
	// its dial timeout now and then, while rules that drop do it in every
	// sample.
	if (m.DF > 0 && m.P < Significance && len(m.unpredicted()) == 0) || m.strayTimeouts() {
		m.First = &Measurement{Protocol: m.Protocol, From: m.From, To: m.To, Predicted: m.Predicted, Counts: m.Counts, N: m.N, Pairs: m.Pairs, Stat: m.Stat, DF: m.DF, P: m.P,
			PredictedMasq: m.PredictedMasq, Masqueraded: m.Masqueraded}
		if err := m.sample(n, to, t); err != nil {
			return m, err
		}
	}
	return m, nil
}

// seenAs is what a client sees of a tracer's outcome: an endpoint's
// "ip:port", OutcomeRefused for REJECT, OutcomeTimeout for DROP, and the
// destination itself answering for ACCEPT.
func seenAs(outcome, to string) string {
	switch outcome {
	case route.Reject:
		return OutcomeRefused
	case route.Drop:
		return OutcomeTimeout
	case route.Accept:
		return to
	}
	return outcome
}

// sample runs m.N fresh trials and sets Counts and, for a spread, the
// chi-square test's Stat, DF and P.
func (m *Measurement) sample(n *ProxyNode, to string, t trial) error {
	counts, masq, err := n.sprayTracked(m.Protocol, m.From, to, m.N, t)
	if err != nil {
		return err
	}
	m.Counts = counts
	if m.PredictedMasq != nil {
		m.Masqueraded = masq
	}
	if len(m.Predicted) > 1 {
		obs := make([]int, 0, len(m.Predicted))
		exp := make([]float64, 0, len(m.Predicted))
		for _, k := range slices.Sorted(maps.Keys(m.Predicted)) {
			obs = append(obs, counts[k])
			exp = append(exp, m.Predicted[k])
		}
		m.Stat, m.DF, m.P = ChiSquare(obs, exp)
	}
	return nil
}

// ChiSquare is Pearson's goodness-of-fit test of observed counts against
// expected shares (which sum to 1): the statistic, its degrees of freedom
// (outcomes - 1) and the p-value, the chance of a statistic at least this
// large if the shares are right.
func ChiSquare(observed []int, shares []float64) (stat float64, df int, p float64) {
	total := 0
	for _, o := range observed {
		total += o
	}
	for i, o := range observed {
		e := shares[i] * float64(total)
		d := float64(o) - e
		stat += d * d / e
	}
	df = len(observed) - 1
	return stat, df, chiSquareSurvival(stat, df)
}

// ChiSquareCritical is the statistic a test with df degrees of freedom
// must stay under to pass at Significance (found by bisection on the
// survival function).
func ChiSquareCritical(df int) float64 {
	lo, hi := 0.0, 1000.0
	for range 200 {
		mid := (lo + hi) / 2
		if chiSquareSurvival(mid, df) > Significance {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// chiSquareSurvival is P(X >= x) for X chi-square with df degrees of
// freedom: the regularized upper incomplete gamma function Q(df/2, x/2).
func chiSquareSurvival(x float64, df int) float64 {
	if df <= 0 {
		return 1
	}
	return upperGamma(float64(df)/2, x/2)
}

// upperGamma is the regularized upper incomplete gamma function Q(a, x),
// by its power series below x = a+1 and by its continued fraction above
// (the two converge fast on either side).
func upperGamma(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	front := math.Exp(a*math.Log(x) - x - lg)
	if x < a+1 {
		// P(a, x) = x^a e^-x / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n))
		term := 1 / a
		sum := term
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if term < sum*1e-16 {
				break
			}
		}
		return 1 - front*sum
	}
	// Q(a, x) = x^a e^-x / Gamma(a) * 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...)))
	// evaluated with the modified Lentz method.
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		step := d * c
		h *= step
		if math.Abs(step-1) < 1e-16 {
			break
		}
	}
	return front * h
}
