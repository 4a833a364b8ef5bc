//! Generated models: gradients against finite differences (weights and inputs), sequential
//! and graph forms, input gradients that follow the weights, training that learns, exact byte
//! counts, and construction of a large layer without touching the stack.

mod common;

use common::Rng;
use fusegraph::optim::keras;
use fusegraph::prelude::*;
use fusegraph::train::{GradSink, LayerAt};

/// An MLP with a smooth activation, so that finite differences are accurate.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct Mlp {
    fc1: Dense<8, 16, Tanh>,
    fc2: Dense<16, 4>,
}

/// A residual MLP.
#[fusegraph::model(loss = Mse, graph(h = fc1(x).tanh(), r = fc2(h).sigmoid() + h, y = head(r)))]
pub struct ResMlp {
    fc1: Dense<6, 5>,
    fc2: Dense<5, 5>,
    head: Dense<5, 2>,
}

/// Two branches multiplied, then concatenated with the input (fan-out of `x`).
#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(
    a = left(x).tanh(),
    b = right(x).swish(),
    m = a * b,
    c = concat(m, x),
    y = head(c)
))]
pub struct TwoBranch {
    left: Dense<4, 3>,
    right: Dense<4, 3, Identity, false>,
    head: Dense<7, 3>,
}

fn data(rng: &mut Rng, n: usize) -> Vec<f32> {
    rng.vec(n, 1.0)
}

#[test]
fn sequential_gradients_match_finite_differences() {
    let mut rng = Rng::new(1);
    let x = data(&mut rng, 5 * 8);
    common::check_weights(&mut Mlp::init(Seed(3)), &x, &[0, 3, 1, 2, 3], 1e-2);
}

#[test]
fn residual_graph_gradients_match_finite_differences() {
    let mut rng = Rng::new(2);
    let x = data(&mut rng, 4 * 6);
    let y = data(&mut rng, 4 * 2);
    common::check_weights(&mut ResMlp::init(Seed(4)), &x, &y, 1e-2);
}

#[test]
fn two_branch_graph_gradients_match_finite_differences() {
    let mut rng = Rng::new(3);
    let x = data(&mut rng, 3 * 4);
    common::check_weights(&mut TwoBranch::init(Seed(5)), &x, &[2, 0, 1], 1e-2);
}

#[test]
fn input_gradients_match_finite_differences_and_follow_the_weights() {
    let mut rng = Rng::new(4);
    let mut model = ResMlp::init(Seed(9));
    let x = data(&mut rng, 2 * 6);
    let mut step =
        TrainStep::<ResMlp, keras::Sgd, 8>::new(&model, keras::Sgd::default().with_lr(0.5));
    let dx = step.input_gradient(&model, &x).to_vec();
    let sum_out = |step: &mut TrainStep<ResMlp, keras::Sgd, 8>, model: &ResMlp, x: &[f32]| {
        step.predict(model, x)
            .iter()
            .map(|&v| f64::from(v))
            .sum::<f64>()
    };
    let h = 1e-2;
    for i in 0..x.len() {
        let (mut up, mut down) = (x.clone(), x.clone());
        up[i] += h;
        down[i] -= h;
        let numeric = (sum_out(&mut step, &model, &up) - sum_out(&mut step, &model, &down))
            / (2.0 * f64::from(h));
        assert!(
            (numeric - f64::from(dx[i])).abs() < 2e-2 * numeric.abs().max(1e-1),
            "x[{i}]: {} vs {numeric}",
            dx[i]
        );
    }
    let y = data(&mut rng, 2 * 2);
    step.run(&mut model, &x, &y);
    let after = step.input_gradient(&model, &x).to_vec();
    assert_ne!(dx, after, "the input gradient must see the updated weights");
}

#[test]
fn training_reduces_the_loss_and_evaluate_counts_accuracy() {
    // Four separable clusters in 8 dimensions.
    let mut rng = Rng::new(5);
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for i in 0..64u32 {
        let class = i % 4;
        for j in 0..8 {
            let centre = if j as u32 % 4 == class { 2.0 } else { 0.0 };
            xs.push(centre + 0.3 * rng.next_f32());
        }
        ys.push(class);
    }
    let mut model = Mlp::init(Seed(1));
    let mut step =
        TrainStep::<Mlp, keras::Adam, 16>::new(&model, keras::Adam::default().with_lr(0.05));
    let before = step.evaluate(&model, &xs, &ys);
    for _ in 0..30 {
        for (x, y) in xs.chunks(16 * 8).zip(ys.chunks(16)) {
            step.run(&mut model, x, y);
        }
    }
    let after = step.evaluate(&model, &xs, &ys);
    assert!(after.loss < 0.1 * before.loss, "{before:?} -> {after:?}");
    assert_eq!(after.accuracy, Some(1.0));
    assert_eq!(step.optimizer().iterations(), 120);
}

#[test]
fn byte_counts_are_exact() {
    type Step = TrainStep<Mlp, keras::Adam, 32>;
    let params = (8 * 16 + 16) + (16 * 4 + 4);
    assert_eq!(<Mlp as Model>::PARAMS, params);
    assert_eq!(Step::BYTES.params, params * 4);
    assert_eq!(Step::BYTES.grads, params * 4);
    assert_eq!(Step::BYTES.slots, 2 * params * 4);
    // Outputs 16 + 4, no saved pre-activation (tanh's derivative reads its output), their
    // gradients 16 + 4, and the input gradient 8, per sample.
    assert_eq!(Step::BYTES.activations, (20 + 20 + 8) * 32 * 4);
    let model = Mlp::init(Seed(0));
    assert_eq!(model.params().len() * 4, Step::BYTES.params);
    // The products of this small model stay on one thread, so the workspace is the same
    // whatever the pool.
    let step = Step::new(&model, keras::Adam::default());
    assert_eq!(step.workspace_bytes(), Step::BYTES.workspace);
    const { assert!(Step::BYTES.workspace > 0) };
    assert_eq!(model.fc1().weight().len(), 8 * 16);
    assert_eq!(model.fc2().bias().len(), 4);
    let names: Vec<String> = <Mlp as Model>::TENSORS
        .iter()
        .map(|t| format!("{}.{}", t.layer, t.tensor.name))
        .collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
}

/// A 4096x4096 layer: 64 MiB of weights, constructed on a thread with a 256 KiB stack.
#[fusegraph::model(loss = Mse)]
pub struct Wide {
    fc: Dense<4096, 4096>,
}

#[test]
fn a_4096_square_layer_constructs_without_touching_the_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let model = Wide::init(Seed(2));
            let step = TrainStep::<Wide, keras::Sgd, 1>::new(&model, keras::Sgd::default());
            (model.params().len(), step.grads().len())
        })
        .unwrap();
    assert_eq!(
        handle.join().unwrap(),
        (4096 * 4096 + 4096, 4096 * 4096 + 4096)
    );
}

/// Large enough that its matrix products and optimizer pass are split across the pool.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct WideMlp {
    fc1: Dense<784, 256, Relu>,
    fc2: Dense<256, 10>,
}

#[test]
fn training_gives_the_same_bits_on_one_and_two_threads() {
    let mut rng = Rng::new(6);
    let x = data(&mut rng, 64 * 784);
    let y: Vec<u32> = (0..64).map(|i| i % 10).collect();
    let run = |threads: usize| {
        common::on_threads(threads, || {
            let mut model = WideMlp::init(Seed(8));
            let mut step =
                TrainStep::<WideMlp, keras::Adam, 64>::new(&model, keras::Adam::default());
            let losses: Vec<u32> = (0..3)
                .map(|_| step.run(&mut model, &x, &y).to_bits())
                .collect();
            (losses, common::bits(model.params()))
        })
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.0, two.0, "losses");
    assert!(one.1 == two.1, "parameters differ between 1 and 2 threads");
}

/// A convolutional net whose passes over a batch of 128 (im2col and its scatter, both
/// poolings, the activation passes) are large enough to be split across the pool.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SplitCnn {
    conv: Conv2d<24, 24, 3, 16, 3, 3, 1, Same, Relu>,
    avg: AvgPool2d<24, 24, 16, 2>,
    pool: MaxPool2d<12, 12, 16, 2>,
    flat: Flatten<576>,
    fc: Dense<576, 10, Tanh>,
}

#[test]
fn a_cnn_whose_passes_split_trains_to_the_same_bits_on_one_and_two_threads() {
    use fusegraph::kernels::parallel::PASS_PARALLEL_MIN;
    const { assert!(128 * 24 * 24 * 27 >= PASS_PARALLEL_MIN, "im2col splits") };
    const {
        assert!(
            128 * (12 * 12 * 16 + 2 * 6 * 6 * 16) >= PASS_PARALLEL_MIN,
            "max pool splits"
        )
    };
    let mut rng = Rng::new(16);
    let x = data(&mut rng, 128 * 24 * 24 * 3);
    let y: Vec<u32> = (0..128).map(|i| i % 10).collect();
    common::assert_same_bits_on_one_and_two_threads::<_, 128>(|| SplitCnn::init(Seed(9)), &x, &y);
}

/// A small sequence classifier: channels-last sequences of 6 positions and 2 channels,
/// convolved, projected and normalized at every position, averaged over time.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SeqNet {
    conv: Conv1d<6, 2, 3, 3, 1, Same, Tanh>,
    strided: Conv1d<6, 3, 3, 3, 2, Valid, Tanh>,
    proj: PerPosition<Dense<3, 4, Tanh>, 2>,
    norm: PerPosition<LayerNorm<4>, 2>,
    pool: MeanOverTime<2, 4>,
    head: Dense<4, 3>,
}

#[test]
fn sequence_model_gradients_match_finite_differences() {
    let mut rng = Rng::new(12);
    let x = data(&mut rng, 5 * 12);
    let mut model = SeqNet::init(Seed(6));
    common::check_weights(&mut model, &x, &[0, 2, 1, 1, 0], 1e-2);
    common::check_loss_input_gradient(&model, &x, &[0, 2, 1, 1, 0], 1e-2, 1e-1);
}

/// A pre-normalization residual block over a sequence, in the graph form: a LayerNorm and a
/// Dense at every position, added to the block's input.
#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(
    h = conv(x).tanh(),
    r = ff(norm(h)).tanh() + h,
    y = head(pool(r))
))]
pub struct SeqResidual {
    conv: Conv1d<5, 2, 4, 3, 1, Same>,
    norm: PerPosition<LayerNorm<4>, 5>,
    ff: PerPosition<Dense<4, 4>, 5>,
    pool: MeanOverTime<5, 4>,
    head: Dense<4, 3>,
}

#[test]
fn a_residual_sequence_graph_s_gradients_match_finite_differences() {
    let mut rng = Rng::new(14);
    let x = data(&mut rng, 4 * 10);
    let mut model = SeqResidual::init(Seed(7));
    common::check_weights(&mut model, &x, &[2, 0, 1, 2], 1e-2);
    common::check_loss_input_gradient(&model, &x, &[2, 0, 1, 2], 1e-2, 1e-1);
}

/// A sequence model whose passes over a batch of 128 (both convolutions' im2col and scatter,
/// the products over every position) are large enough to be split across the pool.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
pub struct SplitSeq {
    conv1: Conv1d<64, 8, 16, 5, 1, Same, Relu>,
    conv2: Conv1d<64, 16, 16, 5, 2, Valid, Tanh>,
    proj: PerPosition<Dense<16, 8, Gelu>, 30>,
    norm: PerPosition<LayerNorm<8>, 30>,
    pool: MeanOverTime<30, 8>,
    fc: Dense<8, 4>,
}

#[test]
fn a_sequence_model_whose_passes_split_trains_to_the_same_bits_on_one_and_two_threads() {
    use fusegraph::kernels::parallel::PASS_PARALLEL_MIN;
    const { assert!(128 * 64 * 5 * 8 >= PASS_PARALLEL_MIN, "im2col splits") };
    let mut rng = Rng::new(17);
    let x = data(&mut rng, 128 * 64 * 8);
    let y: Vec<u32> = (0..128).map(|i| i % 4).collect();
    let losses = common::assert_same_bits_on_one_and_two_threads::<_, 128>(
        || SplitSeq::init(Seed(9)),
        &x,
        &y,
    );
    assert!(losses[1] < losses[0], "the loss falls: {losses:?}");
}

#[test]
fn loss_input_gradients_match_finite_differences() {
    let mut rng = Rng::new(7);
    let model = ResMlp::init(Seed(10));
    let x = data(&mut rng, 3 * 6);
    let y = data(&mut rng, 3 * 2);
    common::check_loss_input_gradient(&model, &x, &y, 1e-2, 1e-1);
}

/// Dropout draws its masks from the step's seed: the same seed, the same training.
#[fusegraph::model(loss = Mse)]
pub struct Dropped {
    fc1: Dense<6, 16, Relu>,
    drop: Dropout<16, 500>,
    fc2: Dense<16, 2>,
}

#[test]
fn dropout_masks_follow_the_step_seed() {
    let mut rng = Rng::new(8);
    let x = data(&mut rng, 4 * 6);
    let y = data(&mut rng, 4 * 2);
    let train = |seed: u64| {
        let mut model = Dropped::init(Seed(1));
        let mut step =
            TrainStep::<Dropped, keras::Sgd, 4>::new(&model, keras::Sgd::default().with_lr(0.1))
                .with_seed(Seed(seed));
        for _ in 0..3 {
            step.run(&mut model, &x, &y);
        }
        common::bits(model.params())
    };
    assert_eq!(train(5), train(5));
    assert_ne!(train(5), train(6), "another seed must drop other units");
}

/// Workspace for calling a model's passes directly.
struct Work {
    gemm: Vec<f32>,
    scratch: Vec<f32>,
    rng: fusegraph::Rng,
}

impl Work {
    fn new<M: Model>(batch: usize) -> Work {
        Work {
            gemm: vec![0.0; M::gemm_len(batch)],
            scratch: vec![0.0; M::scratch_len(batch)],
            rng: fusegraph::Rng::new(Seed(0)),
        }
    }

    fn ctx(&mut self) -> fusegraph::layers::Ctx<'_> {
        fusegraph::layers::Ctx {
            gemm: &mut self.gemm,
            scratch: &mut self.scratch,
            rng: &mut self.rng,
            first_sample: 0,
            mode: fusegraph::layers::Mode::Train,
            lengths: fusegraph::layers::Lengths::FULL,
        }
    }
}

/// One forward pass, driven through `Model` directly: its activations, and node gradients
/// with a random gradient at the output.
struct Pass {
    acts: Vec<f32>,
    node_grads: Vec<f32>,
    batch: usize,
}

impl Pass {
    fn new<M: Model<Input = f32>>(model: &mut M, x: &[f32], seed: u64) -> Pass {
        let batch = x.len() / M::IN;
        let mut acts = vec![0.0; M::ACTIVATIONS * batch];
        let (params, state) = model.split_mut();
        M::forward(
            &mut Work::new::<M>(batch).ctx(),
            params,
            state,
            x,
            &mut acts,
            batch,
        );
        let mut node_grads = vec![0.0; M::NODE_GRADS * batch];
        let g = M::OUTPUT_GRAD_OFFSET * batch;
        let dy = Rng::new(seed).vec(M::OUT * batch, 1.0);
        node_grads[g..g + dy.len()].copy_from_slice(&dy);
        Pass {
            acts,
            node_grads,
            batch,
        }
    }

    /// `backward` into a full gradient buffer: the gradients and d loss / d x.
    fn backward<M: Model<Input = f32>>(&self, params: &[f32], x: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let mut sink = Store {
            params,
            grads: vec![f32::NAN; M::PARAMS],
        };
        let dx = self.run_backward::<M>(&mut sink, x);
        (sink.grads, dx)
    }

    /// `backward` into a sink that hands each layer's gradient, in a buffer the size of the
    /// largest layer, to `update` as soon as the layer is done; returns d loss / d x.
    fn backward_layerwise<M: Model<Input = f32>>(
        &self,
        params: &mut [f32],
        x: &[f32],
        update: impl FnMut(usize, &mut [f32], &[f32]),
    ) -> Vec<f32> {
        let mut sink = Layerwise {
            params,
            grads: vec![f32::NAN; M::MAX_LAYER_PARAMS],
            update,
        };
        self.run_backward::<M>(&mut sink, x)
    }

    /// `M::backward` into `sink`; returns d loss / d x.
    fn run_backward<M: Model<Input = f32>>(&self, sink: &mut dyn GradSink, x: &[f32]) -> Vec<f32> {
        let mut dx = vec![f32::NAN; x.len()];
        M::backward(
            &mut Work::new::<M>(self.batch).ctx(),
            sink,
            x,
            &self.acts,
            &mut self.node_grads.clone(),
            fusegraph::layers::Grad::Set(&mut dx),
            self.batch,
        );
        dx
    }
}

/// Every layer's gradient at its place in a full buffer.
struct Store<'a> {
    params: &'a [f32],
    grads: Vec<f32>,
}

impl GradSink for Store<'_> {
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]) {
        (
            &self.params[at.params.clone()],
            &mut self.grads[at.grads.clone()],
        )
    }
    fn done(&mut self, _: &LayerAt) {}
}

/// Each layer's gradient in a buffer the size of the largest layer, handed to `update` with
/// the layer's offset and parameters when the layer is done (layers without parameters are
/// not reported).
struct Layerwise<'a, F> {
    params: &'a mut [f32],
    grads: Vec<f32>,
    update: F,
}

impl<F: FnMut(usize, &mut [f32], &[f32])> GradSink for Layerwise<'_, F> {
    fn layer(&mut self, at: &LayerAt) -> (&[f32], &mut [f32]) {
        let n = at.grads.len();
        (&self.params[at.params.clone()], &mut self.grads[..n])
    }
    fn done(&mut self, at: &LayerAt) {
        if !at.params.is_empty() {
            let n = at.grads.len();
            (self.update)(
                at.params.start,
                &mut self.params[at.params.clone()],
                &self.grads[..n],
            );
        }
    }
}

/// Each layer's (offset, parameter count), in declaration order, from `M::TENSORS`.
fn layer_spans<M: Model>() -> Vec<(usize, usize)> {
    let mut spans: Vec<(&str, usize, usize)> = Vec::new();
    for t in M::TENSORS {
        match spans.last_mut() {
            Some((layer, _, len)) if *layer == t.layer => *len += t.tensor.len(),
            _ => spans.push((t.layer, t.offset, t.tensor.len())),
        }
    }
    spans.into_iter().map(|(_, o, n)| (o, n)).collect()
}

/// A layer-wise sink with an `update` that only copies each layer's gradient into a full
/// buffer gives `backward`'s gradients and input gradient, bit for bit, and reports each layer
/// once, last layer first, at the offsets and lengths of `TENSORS`.
fn check_layerwise_sink<M: Model<Input = f32>>(mut model: M, x: &[f32]) {
    let pass = Pass::new(&mut model, x, 11);
    let (grads, dx) = pass.backward::<M>(model.params(), x);
    let mut params = model.params().to_vec();
    let mut full = vec![f32::NAN; M::PARAMS];
    let mut reported = Vec::new();
    let dx_update = pass.backward_layerwise::<M>(&mut params, x, |offset, p, g| {
        assert_eq!(p.len(), g.len());
        full[offset..offset + g.len()].copy_from_slice(g);
        reported.push((offset, g.len()));
    });
    assert_eq!(common::bits(&full), common::bits(&grads), "gradients");
    assert_eq!(
        common::bits(&dx_update),
        common::bits(&dx),
        "input gradient"
    );
    assert_eq!(common::bits(&params), common::bits(model.params()));
    let mut expected = layer_spans::<M>();
    expected.reverse();
    assert_eq!(reported, expected, "layers last first, as in TENSORS");
    assert!(reported.iter().all(|&(_, n)| n <= M::MAX_LAYER_PARAMS));
}

#[test]
fn a_layerwise_sink_gets_the_gradients_of_a_full_one_sequential() {
    let x = data(&mut Rng::new(12), 5 * 8);
    check_layerwise_sink(Mlp::init(Seed(3)), &x);
}

#[test]
fn a_layerwise_sink_gets_the_gradients_of_a_full_one_residual() {
    let x = data(&mut Rng::new(13), 4 * 6);
    check_layerwise_sink(ResMlp::init(Seed(4)), &x);
}

#[test]
fn a_layerwise_sink_gets_the_gradients_of_a_full_one_two_branch() {
    let x = data(&mut Rng::new(14), 3 * 4);
    check_layerwise_sink(TwoBranch::init(Seed(5)), &x);
}

/// A layer updated by `update` has already passed its gradient down from its old weights: the
/// layers below see the same gradients as with `backward`, however the update changes it.
fn check_updates_do_not_reach_the_layers_below<M: Model<Input = f32>>(mut model: M, x: &[f32]) {
    let pass = Pass::new(&mut model, x, 15);
    let (grads, dx) = pass.backward::<M>(model.params(), x);
    let mut params = model.params().to_vec();
    let mut full = vec![f32::NAN; M::PARAMS];
    let dx_update = pass.backward_layerwise::<M>(&mut params, x, |offset, p, g| {
        full[offset..offset + g.len()].copy_from_slice(g);
        for (p, g) in p.iter_mut().zip(g) {
            *p = 10.0 * *p - 3.0 * g + 1.0;
        }
    });
    assert_eq!(common::bits(&full), common::bits(&grads), "gradients");
    assert_eq!(
        common::bits(&dx_update),
        common::bits(&dx),
        "input gradient"
    );
    let updated: Vec<f32> = model
        .params()
        .iter()
        .zip(&grads)
        .map(|(p, g)| 10.0 * p - 3.0 * g + 1.0)
        .collect();
    assert_eq!(
        common::bits(&params),
        common::bits(&updated),
        "every layer updated once"
    );
}

#[test]
fn layerwise_updates_take_gradients_below_from_the_old_weights() {
    let mut rng = Rng::new(16);
    check_updates_do_not_reach_the_layers_below(Mlp::init(Seed(6)), &data(&mut rng, 5 * 8));
    check_updates_do_not_reach_the_layers_below(ResMlp::init(Seed(7)), &data(&mut rng, 4 * 6));
    check_updates_do_not_reach_the_layers_below(TwoBranch::init(Seed(8)), &data(&mut rng, 3 * 4));
}

/// The sequential MLP with its parameters inline, as a `static` starts it.
#[fusegraph::model(loss = SoftmaxCrossEntropy, inline)]
pub struct InlineMlp {
    fc1: Dense<8, 16, Tanh>,
    fc2: Dense<16, 4>,
}

static ZEROED: InlineMlp = InlineMlp::zeroed();

/// A model with state (BatchNorm's running statistics), boxed and inline.
#[fusegraph::model(loss = Mse)]
pub struct Normed {
    fc1: Dense<6, 8>,
    norm: BatchNorm<8>,
    fc2: Dense<8, 2, Tanh>,
}

/// [`Normed`] with its parameters and state inline.
#[fusegraph::model(loss = Mse, inline)]
pub struct InlineNormed {
    fc1: Dense<6, 8>,
    norm: BatchNorm<8>,
    fc2: Dense<8, 2, Tanh>,
}

#[test]
fn an_inline_model_is_its_parameters_and_state() {
    assert_eq!(
        std::mem::size_of::<InlineMlp>(),
        (<InlineMlp as Model>::PARAMS + <InlineMlp as Model>::STATE) * 4
    );
    const { assert!(<InlineNormed as Model>::STATE > 0) };
    assert_eq!(
        std::mem::size_of::<InlineNormed>(),
        (<InlineNormed as Model>::PARAMS + <InlineNormed as Model>::STATE) * 4
    );
    assert!(ZEROED.params().iter().all(|&p| p.to_bits() == 0));
    assert_eq!(ZEROED.params().len(), <Mlp as Model>::PARAMS);
}

#[test]
fn inline_and_boxed_twins_initialize_to_the_same_bits() {
    let boxed = Normed::init(Seed(21));
    let inline = InlineNormed::init(Seed(21));
    assert_eq!(common::bits(boxed.params()), common::bits(inline.params()));
    assert_eq!(common::bits(boxed.state()), common::bits(inline.state()));
    assert_ne!(boxed.state(), &vec![0.0; boxed.state().len()][..]);

    // In place, over a model whose values were changed, and from all zeros.
    let mut in_place = InlineNormed::init(Seed(3));
    in_place.params_mut().fill(7.0);
    in_place.init_in_place(Seed(21));
    assert_eq!(
        common::bits(in_place.params()),
        common::bits(boxed.params())
    );
    assert_eq!(common::bits(in_place.state()), common::bits(boxed.state()));
    let mut boxed_in_place = Normed::init(Seed(4));
    boxed_in_place.params_mut().fill(-1.0);
    boxed_in_place.init_in_place(Seed(21));
    assert_eq!(
        common::bits(boxed_in_place.params()),
        common::bits(boxed.params())
    );
    assert_eq!(
        common::bits(boxed_in_place.state()),
        common::bits(boxed.state())
    );
    let mut from_zero = InlineMlp::zeroed();
    from_zero.init_in_place(Seed(2));
    assert_eq!(
        common::bits(from_zero.params()),
        common::bits(Mlp::init(Seed(2)).params())
    );
}

#[test]
fn inline_and_boxed_twins_train_to_the_same_bits() {
    let mut rng = Rng::new(22);
    let x = data(&mut rng, 4 * 6);
    let y = data(&mut rng, 4 * 2);
    let mut boxed = Normed::init(Seed(5));
    let mut inline = InlineNormed::init(Seed(5));
    let adam = keras::Adam::default().with_lr(0.05);
    let mut step_boxed = TrainStep::<Normed, keras::Adam, 4>::new(&boxed, adam);
    let mut step_inline = TrainStep::<InlineNormed, keras::Adam, 4>::new(&inline, adam);
    for _ in 0..5 {
        let a = step_boxed.run(&mut boxed, &x, &y);
        let b = step_inline.run(&mut inline, &x, &y);
        assert_eq!(a.to_bits(), b.to_bits(), "losses");
    }
    assert_eq!(common::bits(boxed.params()), common::bits(inline.params()));
    assert_eq!(common::bits(boxed.state()), common::bits(inline.state()));
}

/// Within a 64 KiB budget for batches of 8 with Adam: the build checks it.
#[fusegraph::model(loss = Mse, inline, max_bytes = 65536, batch = 8, optimizer = fusegraph::optim::keras::Adam)]
pub struct Budgeted {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

/// The same, counting one layer's gradients (each layer updated as soon as they are known).
#[fusegraph::model(loss = Mse, max_bytes = 16_000, batch = 4, optimizer = keras::Sgd, fused)]
pub struct BudgetedFused {
    fc1: Dense<8, 16, Relu>,
    fc2: Dense<16, 4>,
}

#[test]
fn a_budget_counts_the_bytes_of_the_model_and_its_step() {
    assert_eq!(
        Budgeted::BUDGET_BYTES,
        fusegraph::Bytes::of::<Budgeted, keras::Adam>(8, false)
    );
    assert_eq!(
        Budgeted::BUDGET_BYTES.params,
        std::mem::size_of::<Budgeted>()
    );
    assert_eq!(
        Budgeted::BUDGET_BYTES.grads,
        <Budgeted as Model>::PARAMS * 4
    );
    assert_eq!(
        Budgeted::BUDGET_BYTES.slots,
        2 * <Budgeted as Model>::PARAMS * 4
    );
    assert_eq!(
        Budgeted::BUDGET_BYTES,
        TrainStep::<Budgeted, keras::Adam, 8>::BYTES
    );
    const { assert!(Budgeted::BUDGET_BYTES.total() <= 65536) };

    assert_eq!(
        BudgetedFused::BUDGET_BYTES,
        fusegraph::Bytes::of::<BudgetedFused, keras::Sgd>(4, true)
    );
    assert_eq!(BudgetedFused::BUDGET_BYTES.grads, (16 * 8 + 16) * 4);
    assert_eq!(BudgetedFused::BUDGET_BYTES.slots, 0);
    const { assert!(BudgetedFused::BUDGET_BYTES.total() <= 16_000) };
}

fusegraph::activation! {
    /// The inverse square root unit, a smooth user activation for the graph form.
    pub Isru(x) = x / sqrt(1.0 + x * x);
}

/// A graph whose nodes apply a user activation (`act::<T>()`) beside a built-in one.
#[fusegraph::model(loss = SoftmaxCrossEntropy, graph(
    h = fc1(x).act::<Isru>(),
    r = fc2(h).tanh() + h,
    y = head(r.act::<Isru>())
))]
pub struct UserActGraph {
    fc1: Dense<8, 6>,
    fc2: Dense<6, 6>,
    head: Dense<6, 4>,
}

#[test]
fn graph_nodes_take_user_activations() {
    let mut rng = Rng::new(21);
    let x = rng.vec(3 * 8, 1.0);
    let y = [1u32, 3, 0];
    common::check_weights(&mut UserActGraph::init(Seed(4)), &x, &y, 1e-2);
}

/// A tensor-wise rule in a train step sees each trainable tensor with its shape: the step's
/// update is the standalone optimizer's over the same shapes, applied to the step's
/// gradients, and updating layer by layer during the backward pass (`Fused`) gives the same
/// bits.
fn tensor_wise_rule_trains_each_tensor_with_its_shape<R: fusegraph::optim::Rule + Copy>(rule: R) {
    use fusegraph::optim::{Fused, Optimizer, Shape};
    let shapes: Vec<Shape> = <Mlp as Model>::TRAINABLE_TENSORS
        .iter()
        .map(|t| Shape::of(t.tensor.shape))
        .collect();
    assert_eq!(shapes[0], Shape::matrix(8, 16));
    let mut full_model = Mlp::init(Seed(3));
    let mut fused_model = Mlp::init(Seed(3));
    let mut reference = Mlp::init(Seed(3));
    let mut full: TrainStep<Mlp, R, 4> = TrainStep::new(&full_model, rule);
    let mut fused: TrainStep<Mlp, R, 4, Fused> = TrainStep::new(&fused_model, rule);
    let mut grads: TrainStep<Mlp, R, 4> = TrainStep::new(&reference, rule);
    let mut standalone = Optimizer::with_shapes(rule, &shapes, Default::default());
    let mut rng = Rng::new(8);
    for _ in 0..3 {
        let x = rng.vec(4 * 8, 1.0);
        let y = [0u32, 3, 1, 2];
        full.run(&mut full_model, &x, &y);
        fused.run(&mut fused_model, &x, &y);
        grads.gradients(&mut reference, &x, &y);
        standalone.step(reference.params_mut(), grads.grads());
    }
    let bits = |m: &Mlp| m.params().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&full_model),
        bits(&reference),
        "{}: the standalone optimizer",
        R::NAME
    );
    assert_eq!(bits(&fused_model), bits(&full_model), "{}: Fused", R::NAME);
    assert_ne!(
        bits(&full_model),
        bits(&Mlp::init(Seed(3))),
        "{}: trained",
        R::NAME
    );
}

#[test]
fn tensor_wise_rules_train_each_tensor_with_its_shape() {
    use fusegraph::optim::{optax, torch};
    tensor_wise_rule_trains_each_tensor_with_its_shape(keras::Muon::default().with_lr(0.02));
    tensor_wise_rule_trains_each_tensor_with_its_shape(keras::Adafactor::default());
    tensor_wise_rule_trains_each_tensor_with_its_shape(torch::Adafactor::default());
    tensor_wise_rule_trains_each_tensor_with_its_shape(optax::Lamb::default());
    tensor_wise_rule_trains_each_tensor_with_its_shape(optax::ScheduleFreeAdamw::default());
}

/// Schedule-free AdamW's evaluation view in a train step: `view_into` writes the average
/// `(y - (1 - b1) z) / b1` of every trainable tensor into another model, the one to evaluate
/// and save, while training goes on with the iterate `y`.
#[test]
fn schedule_free_evaluates_at_the_average() {
    use fusegraph::optim::optax::ScheduleFreeAdamw;
    let mut model = Mlp::init(Seed(3));
    let rule = ScheduleFreeAdamw::default().with_lr(0.05);
    let mut step: TrainStep<Mlp, ScheduleFreeAdamw, 4> = TrainStep::new(&model, rule);
    let mut rng = Rng::new(9);
    let x = rng.vec(4 * 8, 1.0);
    let y = [0u32, 3, 1, 2];
    for _ in 0..5 {
        step.run(&mut model, &x, &y);
    }
    let mut average = Mlp::init(Seed(7));
    step.view_into(&model, 0, &mut average);
    let b1 = rule.b1;
    for (i, t) in <Mlp as Model>::TRAINABLE_TENSORS.iter().enumerate() {
        let z = step.optimizer().slot_tensor("z", i).unwrap();
        let r = t.offset..t.offset + t.tensor.len();
        for ((got, p), z) in average.params()[r.clone()]
            .iter()
            .zip(&model.params()[r])
            .zip(z)
        {
            assert_eq!(got.to_bits(), ((p - (1.0 - b1) * z) / b1).to_bits());
        }
    }
    assert_ne!(average.params(), model.params());
    let at_average = step.evaluate(&average, &x, &y).loss;
    let at_iterate = step.evaluate(&model, &x, &y).loss;
    assert!(at_average.is_finite() && at_average != at_iterate);
}
