// Package garble garbles and evaluates the boolean circuits of package
// circuit, for package mpc's two executions:
//
//   - ThreeHalvesGarbler and ThreeHalvesEvaluator: three-halves garbling
//     (Rosulek, Roy, CRYPTO 2021): free-XOR, and three half-labels plus
//     five control bits (24.6 bytes) per AND gate. The session's garbling.
//   - Garbler and Evaluator: half-gates with free-XOR and point-and-permute
//     (Zahur, Rosulek, Evans, EUROCRYPT 2015): two labels (32 bytes) per
//     AND gate, the lower bound for linear schemes, kept as the baseline.
//     Both are private and authentic against a malicious evaluator: the
//     active labels reveal nothing about the values without Δ, and an
//     evaluator cannot produce the other label of an output wire.
//   - ProofGarbler and ProofEvaluator: the privacy-free variant for an
//     evaluator who knows all wire values (Frederiksen, Nielsen, Orlandi,
//     EUROCRYPT 2015): one label (16 bytes) per AND gate, authentic only;
//     the verifier's garbling in a zero-knowledge proof from garbled
//     circuits (Jawurek, Kerschbaum, Orlandi, CCS 2013); CheckProof verifies
//     such a garbling once Δ is opened, from the evaluation's own hashes.
//
// Both hash with Hash, the tweakable circular correlation-robust function
// π(π(x) ⊕ i) ⊕ π(x) over fixed-key AES (Guo, Katz, Wang, Yu, S&P 2020),
// with AES-NI through crypto/aes. Tweaks number the AND gates of a whole
// session, across calls, so no two gates share one.
//
// The package holds no keys beyond the labels it is given and does no
// I/O; package mpc chooses the labels (from OT extension), moves the
// tables and decodes.
package garble
