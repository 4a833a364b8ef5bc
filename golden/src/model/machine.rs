//! The buffers of a [`Net`] and its forward and backward passes, laid out and sequenced as
//! `#[fusegraph::model]` generates them for a sequential model (node `k` owns
//! `[offset_k * batch, (offset_k + width_k) * batch)` of the activation buffer; backward runs
//! the layers in reverse, each writing the gradient of its input), so that both give the same
//! bits. A node with a residual writes its output apart and passes on the sum, as a graph
//! model's `+` does: its backward reads the output it wrote.

use super::layers::Net;
use super::{ModelInput, Targets};
use fusegraph::layers::{Backward, Ctx, Forward, Grad, Lengths, Mode};
use fusegraph::loss::{Loss, Mse, SoftmaxCrossEntropy};
use fusegraph::{Rng, Seed};

/// Gradients, activations and workspace for running a [`Net`] on batches of at most
/// `max_batch` samples, as `TrainStep` owns them for a generated model.
pub(crate) struct Machine<'n> {
    net: &'n Net,
    max_batch: usize,
    /// Per-sample offset of each node's output in `acts` (its saved values follow it).
    act_offsets: Vec<usize>,
    /// Per-sample offset of each node's output gradient in `node_grads`.
    grad_offsets: Vec<usize>,
    grads: Vec<f32>,
    acts: Vec<f32>,
    node_grads: Vec<f32>,
    dx: Vec<f32>,
    scratch: Vec<f32>,
    gemm: Vec<f32>,
    rng: Rng,
}

impl<'n> Machine<'n> {
    /// Buffers for `net` and batches of at most `max_batch` samples.
    pub fn new(net: &'n Net, max_batch: usize) -> Self {
        let (mut act_offsets, mut grad_offsets) = (Vec::new(), Vec::new());
        let (mut a, mut g) = (0, 0);
        for node in &net.nodes {
            act_offsets.push(a);
            grad_offsets.push(g);
            a += node.outputs + node.saved + own_len(node);
            g += node.outputs;
        }
        let most =
            |f: &dyn Fn(&super::layers::Node) -> usize| net.nodes.iter().map(f).max().unwrap_or(0);
        Machine {
            net,
            max_batch,
            act_offsets,
            grad_offsets,
            grads: vec![0.0; net.layout.len()],
            acts: vec![0.0; a * max_batch],
            node_grads: vec![0.0; g * max_batch],
            dx: vec![0.0; net.inputs() * max_batch],
            scratch: vec![0.0; most(&|n| n.scratch_len(max_batch))],
            gemm: vec![0.0; most(&|n| n.gemm_len(max_batch))],
            rng: Rng::new(Seed(0)),
        }
    }

    /// The gradients of the last [`loss_and_backward`](Self::loss_and_backward) (or input
    /// gradient), laid out as the parameters.
    pub fn grads(&self) -> &[f32] {
        &self.grads
    }

    /// Samples in an input of `len` values (or ids).
    fn batch_of(&self, len: usize) -> usize {
        let n = self.net.inputs();
        assert!(
            n > 0 && len.is_multiple_of(n),
            "input length {len} is not a multiple of {n}"
        );
        let batch = len / n;
        assert!(
            batch <= self.max_batch,
            "batch of {batch} samples exceeds the maximum {}",
            self.max_batch
        );
        batch
    }

    /// The forward pass over the samples of `x` of `lengths`; returns their number.
    fn forward(
        &mut self,
        params: &[f32],
        x: &ModelInput,
        lengths: Lengths<'_>,
        mode: Mode,
    ) -> usize {
        let batch = self.batch_of(x.len());
        let mut ctx = Ctx {
            gemm: &mut self.gemm,
            scratch: &mut self.scratch,
            rng: &mut self.rng,
            first_sample: 0,
            mode,
            lengths,
        };
        let mut rest = &mut self.acts[..];
        // The input of every node so far: `x` (nothing for ids, which only the first node
        // reads), then each node's output.
        let mut inputs: Vec<&[f32]> = vec![match x {
            ModelInput::Values(x) => x,
            ModelInput::Ids(_) => &[],
        }];
        for (k, node) in self.net.nodes.iter().enumerate() {
            let (y, r) = std::mem::take(&mut rest).split_at_mut(node.outputs * batch);
            let (saved, r) = r.split_at_mut(node.saved * batch);
            let (own, r) = r.split_at_mut(own_len(node) * batch);
            rest = r;
            let (params, state) = (&params[node.params.clone()], &mut [][..]);
            let written = if node.residual.is_some() {
                &mut *own
            } else {
                &mut *y
            };
            match x {
                ModelInput::Ids(ids) if k == 0 => node.forward_ids(Forward {
                    params,
                    state,
                    x: ids,
                    y: written,
                    saved,
                    batch,
                }),
                _ => {
                    let x = inputs[inputs.len() - 1];
                    let io = Forward {
                        params,
                        state,
                        x,
                        y: written,
                        saved,
                        batch,
                    };
                    node.forward(&mut ctx, io)
                }
            }
            if let Some(from) = node.residual {
                let sums = y.iter_mut().zip(&*own).zip(inputs[from]);
                sums.for_each(|((y, &own), &r)| *y = own + r);
            }
            inputs.push(y);
        }
        batch
    }

    /// Where the last node's output, and its gradient, lie for `batch` samples.
    fn output_ranges(&self, batch: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let n = self.net.outputs() * batch;
        let a = self.act_offsets.last().copied().unwrap_or(0) * batch;
        let g = self.grad_offsets.last().copied().unwrap_or(0) * batch;
        (a..a + n, g..g + n)
    }

    /// The backward pass from the output gradient already in place, over the `batch`
    /// samples of `x` of `lengths`; writes the parameter gradients and, if `with_dx`, d / d x.
    fn backward(
        &mut self,
        params: &[f32],
        (x, lengths): (&ModelInput, Lengths<'_>),
        batch: usize,
        with_dx: bool,
        mode: Mode,
    ) {
        let Machine {
            net,
            grads,
            acts,
            node_grads,
            dx,
            scratch,
            gemm,
            rng,
            ..
        } = self;
        let mut ctx = Ctx {
            gemm,
            scratch,
            rng,
            first_sample: 0,
            mode,
            lengths,
        };
        // Each node's output as the next node reads it, and as the node wrote it.
        let (mut ys, mut owns, mut saved) = (Vec::new(), Vec::new(), Vec::new());
        let mut rest = &acts[..];
        for node in &net.nodes {
            let (y, r) = rest.split_at(node.outputs * batch);
            let (s, r) = r.split_at(node.saved * batch);
            let (own, r) = r.split_at(own_len(node) * batch);
            ys.push(y);
            owns.push(if node.residual.is_some() { own } else { y });
            saved.push(s);
            rest = r;
        }
        let mut ds = Vec::new();
        let mut rest = &mut node_grads[..];
        for node in &net.nodes {
            let (d, r) = std::mem::take(&mut rest).split_at_mut(node.outputs * batch);
            ds.push(d);
            rest = r;
        }
        // Whether a node's output gradient already holds a residual's share.
        let mut given = vec![false; net.nodes.len()];
        for (k, node) in net.nodes.iter().enumerate().rev() {
            let (before, after) = ds.split_at_mut(k);
            if let Some(from) = node.residual {
                give_residual(before[from - 1], after[0], &mut given[from - 1]);
            }
            let (input, dx) = match (before.last_mut(), x) {
                (Some(d), _) if given[k - 1] => (ys[k - 1], Grad::Add(d)),
                (Some(d), _) => (ys[k - 1], Grad::Set(d)),
                (None, ModelInput::Ids(ids)) => {
                    node.backward_ids(Backward {
                        params: &params[node.params.clone()],
                        x: ids,
                        y: owns[k],
                        saved: saved[k],
                        dy: &mut *after[0],
                        dx: Grad::Skip,
                        frozen: fusegraph::layers::Frozen::NONE,
                        dparams: &mut grads[node.params.clone()],
                        batch,
                    });
                    continue;
                }
                (None, ModelInput::Values(x)) if with_dx => {
                    (&x[..], Grad::Set(&mut dx[..net.inputs() * batch]))
                }
                (None, ModelInput::Values(x)) => (&x[..], Grad::Skip),
            };
            let io = Backward {
                params: &params[node.params.clone()],
                x: input,
                y: owns[k],
                saved: saved[k],
                dy: &mut *after[0],
                dx,
                frozen: fusegraph::layers::Frozen::NONE,
                dparams: &mut grads[node.params.clone()],
                batch,
            };
            node.backward(&mut ctx, io);
        }
    }

    /// Forward in training mode, the loss of a batch of samples of `lengths` and backward
    /// into the gradients; returns the loss.
    pub fn loss_and_backward(
        &mut self,
        params: &[f32],
        x: &ModelInput,
        lengths: Lengths<'_>,
        y: &Targets,
    ) -> f32 {
        let batch = self.forward(params, x, lengths, Mode::Train);
        let (out, grad) = self.output_ranges(batch);
        let n = self.net.outputs();
        let (pred, dpred) = (&self.acts[out], &mut self.node_grads[grad]);
        let loss = match y {
            Targets::SoftmaxCrossEntropy(c) => {
                SoftmaxCrossEntropy::loss_and_grad(pred, c, dpred, n)
            }
            Targets::Mse(v) => Mse::loss_and_grad(pred, v, dpred, n),
            // `SequenceCrossEntropy<C>` is this, each position a row of `C` logits.
            Targets::SequenceCrossEntropy { labels, classes } => {
                SoftmaxCrossEntropy::loss_and_grad(pred, labels, dpred, *classes)
            }
        };
        self.backward(params, (x, lengths), batch, false, Mode::Train);
        loss
    }

    /// The model's output for a batch of samples of `lengths` (inference mode).
    pub fn predict(&mut self, params: &[f32], x: &ModelInput, lengths: Lengths<'_>) -> &[f32] {
        let batch = self.forward(params, x, lengths, Mode::Eval);
        let (out, _) = self.output_ranges(batch);
        &self.acts[out]
    }

    /// d sum(output) / d params for a batch of samples of `lengths` (inference mode), laid
    /// out as the parameters.
    pub fn output_gradients(
        &mut self,
        params: &[f32],
        x: &ModelInput,
        lengths: Lengths<'_>,
    ) -> &[f32] {
        self.backward_from_sum(params, (x, lengths), false);
        &self.grads
    }

    /// d sum(output) / d x for a batch of samples of `lengths` (inference mode); zeros for
    /// token ids, which have no gradient.
    pub fn input_gradient(
        &mut self,
        params: &[f32],
        x: &ModelInput,
        lengths: Lengths<'_>,
    ) -> &[f32] {
        self.dx.fill(0.0);
        let batch = self.backward_from_sum(params, (x, lengths), true);
        &self.dx[..self.net.inputs() * batch]
    }

    /// Forward (inference mode) over the samples of `x` of `lengths` and backward from the
    /// gradient of the sum of the outputs (and, if `with_dx`, into d / d x); returns the
    /// samples.
    fn backward_from_sum(
        &mut self,
        params: &[f32],
        (x, lengths): (&ModelInput, Lengths<'_>),
        with_dx: bool,
    ) -> usize {
        let batch = self.forward(params, x, lengths, Mode::Eval);
        let (_, grad) = self.output_ranges(batch);
        self.node_grads[grad].fill(1.0);
        self.backward(params, (x, lengths), batch, with_dx, Mode::Eval);
        batch
    }
}

/// Per-sample values a node keeps of its own output besides the output the next node reads:
/// a node with a residual keeps what it wrote (its backward reads it, as a layer reads its
/// `y`), and passes on that plus the residual.
fn own_len(node: &super::layers::Node) -> usize {
    if node.residual.is_some() {
        node.outputs
    } else {
        0
    }
}

/// Gives a residual's output gradient `dy` to the output gradient `d` of the node before the
/// block: the first share overwrites it, later ones (and the block's own path) add to it.
fn give_residual(d: &mut [f32], dy: &[f32], given: &mut bool) {
    if *given {
        d.iter_mut().zip(dy).for_each(|(d, &g)| *d += g);
    } else {
        d.copy_from_slice(dy);
        *given = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Options the shipped cases do not use: `same` padding, stride 2, no bias, sigmoid.
    fn net() -> Net {
        Net::parse(&json!({"input_shape": [5, 4, 2], "layers": [
            {"name": "c", "type": "Conv2D", "filters": 3, "kernel_size": [3, 2], "strides": 2,
             "padding": "same", "activation": "tanh", "use_bias": false},
            {"name": "f", "type": "Flatten"},
            {"name": "d", "type": "Dense", "units": 4, "activation": "sigmoid", "use_bias": false},
            {"name": "o", "type": "Dense", "units": 2}
        ]}))
        .unwrap()
    }

    fn values(n: usize, seed: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 + seed) * 0.77).sin()).collect()
    }

    /// Central differences of `f` with step 1e-2 on every value of `v`, against `grad`.
    fn check(what: &str, v: &[f32], grad: &[f32], mut f: impl FnMut(&[f32]) -> f64) {
        let h = 1e-2;
        let mut v = v.to_vec();
        for i in 0..v.len() {
            let orig = v[i];
            v[i] = orig + h;
            let up = f(&v);
            v[i] = orig - h;
            let down = f(&v);
            v[i] = orig;
            let numeric = (up - down) / (2.0 * f64::from(h));
            let g = f64::from(grad[i]);
            assert!(
                (numeric - g).abs() <= 2e-2 * numeric.abs() + 1e-3,
                "{what}[{i}]: backward {g}, differences {numeric}"
            );
        }
    }

    /// The gradient of an MSE loss of `net` on the batch `x` matches central differences.
    fn params_match_finite_differences(net: &Net, x: &ModelInput) {
        let batch = x.len() / net.inputs();
        let mut m = Machine::new(net, batch);
        let params = values(net.layout.len(), 4.0);
        let targets = values(net.outputs() * batch, 5.0);
        m.loss_and_backward(&params, x, Lengths::FULL, &Targets::Mse(targets.clone()));
        let grads = m.grads().to_vec();
        check("params", &params, &grads, |p| {
            f64::from(Mse::loss(
                m.predict(p, x, Lengths::FULL),
                &targets,
                net.outputs(),
            ))
        });
    }

    #[test]
    fn residuals_on_activations_that_read_their_output_match_finite_differences() {
        // Tanh, sigmoid and GELU take their derivative from the output they wrote, which a
        // residual must not change.
        let net = Net::parse(&json!({"input_shape": [4], "layers": [
            {"name": "in", "type": "Dense", "in": 4, "units": 4},
            {"name": "a", "type": "Dense", "in": 4, "units": 4, "activation": "tanh",
             "residual": "h = h + a(h)"},
            {"name": "b", "type": "Dense", "in": 4, "units": 4, "activation": "sigmoid",
             "residual": "h = h + b(h)"},
            {"name": "c", "type": "Dense", "in": 4, "units": 4, "activation": "gelu",
             "residual": "h = h + c(h)"},
            {"name": "head", "type": "Dense", "in": 4, "units": 2}
        ]}))
        .unwrap();
        params_match_finite_differences(&net, &ModelInput::Values(values(4 * 3, 2.0)));
    }

    #[test]
    fn a_token_model_with_residuals_matches_finite_differences() {
        let net = Net::parse(
            &json!({"input_shape": [4], "input_dtype": "int (token ids)",
                "layers": [
                {"name": "tok", "type": "Embedding", "vocab": 5, "dim": 4},
                {"name": "pos", "type": "PositionalEmbedding", "max_len": 6, "dim": 4},
                {"name": "ln", "type": "LayerNorm", "features": 4},
                {"name": "attn", "type": "CausalSelfAttention", "dim": 4, "num_heads": 2,
                 "residual": "h = h + attn(ln(h))"},
                {"name": "ff", "type": "Dense", "in": 4, "units": 4, "activation": "gelu",
                 "residual": "h = h + ff(h)"},
                {"name": "head", "type": "Dense", "in": 4, "units": 3}
            ]}),
        )
        .unwrap();
        let ids = ModelInput::Ids(vec![3, 1, 4, 1, 0, 2, 2, 4]);
        params_match_finite_differences(&net, &ids);
    }

    #[test]
    fn gradients_match_finite_differences() {
        let net = net();
        let batch = 3;
        let mut m = Machine::new(&net, batch);
        let params = values(net.layout.len(), 1.0);
        let x = ModelInput::Values(values(net.inputs() * batch, 2.0));
        let targets = values(net.outputs() * batch, 3.0);
        let y = Targets::Mse(targets.clone());
        let loss = m.loss_and_backward(&params, &x, Lengths::FULL, &y);
        let grads = m.grads().to_vec();
        let out = m.predict(&params, &x, Lengths::FULL).to_vec();
        assert_eq!(loss, Mse::loss(&out, &targets, 2));
        check("params", &params, &grads, |p| {
            f64::from(Mse::loss(m.predict(p, &x, Lengths::FULL), &targets, 2))
        });
        let dx = m.input_gradient(&params, &x, Lengths::FULL).to_vec();
        let ModelInput::Values(x) = x else {
            unreachable!("the input is features")
        };
        check("x", &x, &dx, |x| {
            let x = ModelInput::Values(x.to_vec());
            m.predict(&params, &x, Lengths::FULL)
                .iter()
                .map(|&v| f64::from(v))
                .sum()
        });
    }
}
