//! Frozen tensors (`#[frozen]`), as PyTorch's `requires_grad=False` on a tensor handed to the
//! optimizer: a step of a model with frozen tensors gives the bits of its unfrozen twin whose
//! gradients of the trainable tensors alone go to an optimizer over those tensors alone (no
//! update, no decay, no state for the frozen ones, which are not in the clipping norm either),
//! in the full and the fused modes, in checkpoints, in a data-parallel step and from an arena;
//! its buffers shrink, and the backward pass calls no layer below the lowest one that trains.
//! A frozen layer can also be read from a `static`, or from a file saved by PyTorch when the
//! crate compiles.

mod common;

use common::{bits, Rng};
use fusegraph::distributed::{DataParallel, Shards, Solo};
use fusegraph::layers::{Backward, Ctx, Forward, Layer, Tensor};
use fusegraph::optim::{torch, Config, Fused, NormClip, Optimizer, Rule, WeightDecay};
use fusegraph::prelude::*;
use fusegraph::train::{EmbeddedStep, NamedTensor};
use std::sync::atomic::{AtomicUsize, Ordering};

const B: usize = 6;

/// The golden case's frozen MLP backbone: the first two layers frozen.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Backbone {
    #[frozen]
    fc1: Dense<6, 10, Tanh>,
    #[frozen]
    fc2: Dense<10, 8, Relu>,
    head: Dense<8, 3>,
}

/// Only the biases train (BitFit), but for the middle layer, which trains whole.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct BitFit {
    #[frozen(weight)]
    fc1: Dense<6, 10, Tanh>,
    fc2: Dense<10, 8, Relu>,
    #[frozen(weight)]
    head: Dense<8, 3>,
}

/// The same layers, every tensor trained.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Twin {
    fc1: Dense<6, 10, Tanh>,
    fc2: Dense<10, 8, Relu>,
    head: Dense<8, 3>,
}

/// A batch of `B` samples: six features, three classes.
fn batch(seed: u64) -> (Vec<f32>, Vec<u32>) {
    let mut rng = Rng::new(seed);
    let x = rng.vec(B * 6, 1.0);
    let y = (0..B as u32).map(|i| (i * 7 + seed as u32) % 3).collect();
    (x, y)
}

/// The values of `tensors` of `params`, one tensor after the other.
fn gather(tensors: &[NamedTensor], params: &[f32]) -> Vec<f32> {
    let per = tensors
        .iter()
        .map(|t| &params[t.offset..t.offset + t.tensor.len()]);
    per.flatten().copied().collect()
}

/// Writes `values` (the tensors of `tensors`, one after the other) back into `params`.
fn scatter(tensors: &[NamedTensor], values: &[f32], params: &mut [f32]) {
    let mut rest = values;
    for t in tensors {
        let (head, tail) = rest.split_at(t.tensor.len());
        params[t.offset..t.offset + t.tensor.len()].copy_from_slice(head);
        rest = tail;
    }
}

/// `steps` steps of PyTorch's semantics, by hand: the twin's gradients of the trainable tensors
/// of `M` alone, an optimizer over those tensors alone. Returns the parameters after each step
/// and the final slot `slot`.
fn by_hand<M: Model, R: Rule>(
    rule: R,
    config: Config,
    steps: u64,
    slot: &str,
) -> (Vec<Vec<u32>>, Vec<u32>) {
    let mut twin = Twin::init(Seed(4));
    let mut step = TrainStep::<Twin, R, B>::new(&twin, rule);
    let lens: Vec<usize> = M::TRAINABLE_TENSORS
        .iter()
        .map(|t| t.tensor.len())
        .collect();
    let mut opt = Optimizer::with_config(rule, &lens, config);
    let mut after = Vec::new();
    for s in 0..steps {
        let (x, y) = batch(s);
        step.gradients(&mut twin, &x, &y);
        let grads = gather(M::TRAINABLE_TENSORS, step.grads());
        let mut params = gather(M::TRAINABLE_TENSORS, twin.params());
        opt.step(&mut params, &grads);
        scatter(M::TRAINABLE_TENSORS, &params, twin.params_mut());
        after.push(bits(twin.params()));
    }
    (after, bits(opt.slot(slot).unwrap()))
}

/// The same steps on `model`, whose tensors are the twin's, with `step`.
fn trained<M: Model<Input = f32>, R: Rule, U: fusegraph::optim::UpdateMode>(
    model: &mut M,
    step: &mut TrainStep<M, R, B, U>,
    steps: u64,
) -> Vec<Vec<u32>>
where
    M::Loss: fusegraph::loss::Loss<Target = u32>,
{
    (0..steps)
        .map(|s| {
            let (x, y) = batch(s);
            step.run(model, &x, &y);
            bits(model.params())
        })
        .collect()
}

/// The decayed, globally clipped SGD with momentum of the golden frozen case.
fn clipped_sgd() -> (torch::SgdMomentum, Config) {
    let rule = torch::SgdMomentum::default()
        .with_lr(0.05)
        .with_momentum(0.9);
    let config = Config::new()
        .weight_decay(WeightDecay::L2(0.01))
        .clip_norm(NormClip::GlobalTorch(0.35));
    (rule, config)
}

#[test]
fn a_frozen_backbone_trains_as_pytorch_with_requires_grad_false() {
    let (rule, config) = clipped_sgd();
    let (want, want_slot) = by_hand::<Backbone, _>(rule, config, 5, "momentum_buffer");
    let mut model = Backbone::init(Seed(4));
    assert_eq!(model.params(), Twin::init(Seed(4)).params());
    let initial = model.params().to_vec();
    let mut step = TrainStep::<Backbone, _, B>::with_config(&model, rule, config);
    assert_eq!(trained(&mut model, &mut step, 5), want);
    assert_eq!(
        bits(step.optimizer().slot("momentum_buffer").unwrap()),
        want_slot
    );
    // The frozen layers keep their values exactly.
    let frozen = Backbone::TENSORS.iter().filter(|t| t.grad.is_none());
    for t in frozen {
        let r = t.offset..t.offset + t.tensor.len();
        assert_eq!(
            bits(&model.params()[r.clone()]),
            bits(&initial[r]),
            "{}",
            t.layer
        );
    }
}

#[test]
fn bias_only_training_matches_by_hand_in_the_full_and_the_fused_modes() {
    let rule = torch::Adam::default().with_lr(0.01);
    let config = Config::new().weight_decay(WeightDecay::Decoupled(0.05));
    let (want, want_slot) = by_hand::<BitFit, _>(rule, config, 4, "exp_avg");
    let mut model = BitFit::init(Seed(4));
    let mut step = TrainStep::<BitFit, _, B>::with_config(&model, rule, config);
    assert_eq!(trained(&mut model, &mut step, 4), want);
    assert_eq!(bits(step.optimizer().slot("exp_avg").unwrap()), want_slot);

    let mut model = BitFit::init(Seed(4));
    let fused_config = Config::<Fused>::new().weight_decay(WeightDecay::Decoupled(0.05));
    let mut fused = TrainStep::<BitFit, _, B, Fused>::with_config(&model, rule, fused_config);
    assert_eq!(trained(&mut model, &mut fused, 4), want);
    assert_eq!(bits(fused.optimizer().slot("exp_avg").unwrap()), want_slot);
}

#[test]
fn frozen_tensors_have_no_gradients_and_no_slots() {
    let trainable = |names: &[(&str, &str)], tensors: &[NamedTensor]| {
        let got: Vec<(&str, &str)> = tensors.iter().map(|t| (t.layer, t.tensor.name)).collect();
        assert_eq!(got, names);
    };
    trainable(
        &[("head", "weight"), ("head", "bias")],
        Backbone::TRAINABLE_TENSORS,
    );
    trainable(
        &[
            ("fc1", "bias"),
            ("fc2", "weight"),
            ("fc2", "bias"),
            ("head", "bias"),
        ],
        BitFit::TRAINABLE_TENSORS,
    );
    assert_eq!(Backbone::PARAMS, Twin::PARAMS);
    assert_eq!(Backbone::TRAINABLE, 8 * 3 + 3);
    assert_eq!(BitFit::TRAINABLE, 10 + 10 * 8 + 8 + 3);
    // Each trainable tensor's gradient follows the previous one's.
    let mut next = 0;
    for t in BitFit::TRAINABLE_TENSORS {
        assert_eq!(t.grad, Some(next));
        next += t.tensor.len();
    }

    type Sgd = torch::SgdMomentum;
    let (full, frozen) = (
        TrainStep::<Twin, Sgd, B>::BYTES,
        TrainStep::<Backbone, Sgd, B>::BYTES,
    );
    assert_eq!(frozen.params, Backbone::TRAINABLE * 4);
    assert_eq!(frozen.frozen, (Backbone::PARAMS - Backbone::TRAINABLE) * 4);
    assert_eq!(frozen.params + frozen.frozen, full.params);
    assert_eq!(frozen.grads, Backbone::TRAINABLE * 4);
    assert_eq!(frozen.slots, Backbone::TRAINABLE * 4);
    assert_eq!(full.slots, Twin::PARAMS * 4);
    assert_eq!(frozen.activations, full.activations);
    let fused = TrainStep::<BitFit, Sgd, B, Fused>::BYTES;
    assert_eq!(
        fused.grads,
        10 * 8 * 4 + 8 * 4,
        "the largest layer's trainable tensors"
    );

    let model = Backbone::init(Seed(1));
    let mut step = TrainStep::<Backbone, Sgd, B>::new(&model, Sgd::default());
    let (x, y) = batch(1);
    let mut model = model;
    step.gradients(&mut model, &x, &y);
    assert_eq!(step.grads().len(), Backbone::TRAINABLE);
    assert_eq!(step.optimizer().len(), Backbone::TRAINABLE);
    assert_eq!(step.optimizer().tensor_count(), 2);
}

#[test]
fn an_embedded_step_of_a_frozen_model_needs_less_and_gives_the_same_bits() {
    type Sgd = torch::SgdMomentum;
    type Small = EmbeddedStep<'static, BitFit, Sgd, B, Fused>;
    type Whole = EmbeddedStep<'static, Twin, Sgd, B, Fused>;
    // The largest layer (fc2) trains whole: the same gradient buffer, one slot fewer per
    // frozen value.
    assert_eq!(
        Whole::FLOATS - Small::FLOATS,
        Twin::PARAMS - BitFit::TRAINABLE
    );
    let rule = Sgd::default().with_lr(0.1).with_momentum(0.9);
    let arena: &'static mut [f32] = Box::leak(vec![0.0; Small::FLOATS].into_boxed_slice());
    let (mut a, mut b) = (BitFit::init(Seed(4)), BitFit::init(Seed(4)));
    let mut embedded = Small::new(&a, rule, arena).unwrap();
    let mut allocated = TrainStep::<BitFit, Sgd, B, Fused>::new(&b, rule);
    for s in 0..3 {
        let (x, y) = batch(s);
        embedded.run(&mut a, &x, &y);
        allocated.run(&mut b, &x, &y);
    }
    assert_eq!(bits(a.params()), bits(b.params()));
}

/// Backward calls of [`Probe`], the layer below the frozen ones.
static PROBED: AtomicUsize = AtomicUsize::new(0);

/// The identity over 6 values that counts its backward calls in [`PROBED`].
struct Probe;

impl Layer for Probe {
    const IN: usize = 6;
    const OUT: usize = 6;
    const PARAMS: usize = 0;
    const STATE: usize = 0;
    const SAVED: usize = 0;
    const TENSORS: &'static [Tensor] = &[];
    const FREEZABLE: bool = true;

    fn describe(out: &mut dyn core::fmt::Write) -> core::fmt::Result {
        out.write_str("Probe")
    }
    fn forward(_: &mut Ctx<'_>, io: Forward<'_>) {
        io.y.copy_from_slice(io.x);
    }
    fn backward(_: &mut Ctx<'_>, io: Backward<'_>) {
        PROBED.fetch_add(1, Ordering::SeqCst);
        io.dx.give(io.dy);
    }
}

/// A probe under a frozen backbone.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct Probed {
    probe: Probe,
    #[frozen]
    fc1: Dense<6, 10, Tanh>,
    head: Dense<10, 3>,
}

#[test]
fn the_backward_pass_stops_at_the_lowest_layer_that_trains_unless_dx_is_asked_for() {
    let mut model = Probed::init(Seed(2));
    let mut step = TrainStep::<Probed, torch::Sgd, B>::new(&model, torch::Sgd::default());
    let (x, y) = batch(3);
    let before = PROBED.load(Ordering::SeqCst);
    step.run(&mut model, &x, &y);
    assert_eq!(
        PROBED.load(Ordering::SeqCst),
        before,
        "nothing below fc1 runs"
    );
    let dx = step.loss_input_gradient(&model, &x, &y).to_vec();
    assert_eq!(
        PROBED.load(Ordering::SeqCst),
        before + 1,
        "the input gradient runs it"
    );
    // The input gradient flows through the frozen layer as through its twin.
    #[fusegraph::model(loss = SoftmaxCrossEntropy)]
    struct Open {
        probe: Probe,
        fc1: Dense<6, 10, Tanh>,
        head: Dense<10, 3>,
    }
    let mut open = Open::init(Seed(2));
    open.params_mut().copy_from_slice(model.params());
    let mut open_step = TrainStep::<Open, torch::Sgd, B>::new(&open, torch::Sgd::default());
    assert_eq!(
        bits(open_step.loss_input_gradient(&open, &x, &y)),
        bits(&dx)
    );
}

#[test]
fn a_frozen_model_in_a_data_parallel_step_gives_the_bits_of_one_process() {
    let (rule, config) = clipped_sgd();
    let mut a = Backbone::init(Seed(4));
    let mut b = Backbone::init(Seed(4));
    let mut step_a = TrainStep::<Backbone, _, B>::with_config(&a, rule, config);
    let mut step_b = TrainStep::<Backbone, _, B>::with_config(&b, rule, config);
    let mut dp = DataParallel::<Backbone, _, B, Solo>::new(Solo, Shards::new(1, B)).unwrap();
    // Only the trainable tensors' gradients travel.
    assert_eq!(dp.gradient_bytes(), Backbone::TRAINABLE * 4);
    const { assert!(Backbone::TRAINABLE < Backbone::PARAMS) };
    for s in 0..3 {
        let (x, y) = batch(s);
        dp.run(&mut a, &mut step_a, &x, &y);
        step_b.run(&mut b, &x, &y);
    }
    assert_eq!(bits(a.params()), bits(b.params()));
}

#[cfg(feature = "checkpoint")]
#[test]
fn a_checkpoint_of_a_frozen_model_holds_the_slots_of_its_trainable_tensors_and_resumes() {
    use fusegraph::checkpoint;
    let (rule, config) = clipped_sgd();
    let mut model = BitFit::init(Seed(4));
    let mut step = TrainStep::<BitFit, _, B>::with_config(&model, rule, config);
    trained(&mut model, &mut step, 2);
    let bytes = checkpoint::to_bytes(&model, &step).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.contains("\"optimizer.momentum_buffer.fc2.weight\""));
    assert!(text.contains("\"optimizer.momentum_buffer.fc1.bias\""));
    assert!(
        !text.contains("\"optimizer.momentum_buffer.fc1.weight\""),
        "no slot of a frozen tensor"
    );
    assert!(text.contains("\"fc1.weight\""), "frozen tensors are saved");

    let mut resumed = BitFit::init(Seed(9));
    let mut resumed_step = TrainStep::<BitFit, _, B>::with_config(&resumed, rule, config);
    checkpoint::from_bytes(&bytes, &mut resumed, &mut resumed_step).unwrap();
    let go_on = |m: &mut BitFit, s: &mut TrainStep<BitFit, torch::SgdMomentum, B>| {
        (2..4)
            .map(|i| {
                let (x, y) = batch(i);
                s.run(m, &x, &y);
                bits(m.params())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        go_on(&mut resumed, &mut resumed_step),
        go_on(&mut model, &mut step)
    );

    // The weights of the unfrozen twin load into the frozen model: fine-tuning starts there.
    let twin = Twin::init(Seed(11));
    let weights = checkpoint::model_to_bytes(&twin).unwrap();
    let mut tuned = BitFit::init(Seed(0));
    checkpoint::model_from_bytes(&weights, &mut tuned).unwrap();
    assert_eq!(bits(tuned.params()), bits(twin.params()));
}

/// `fc1` of `tests/data/torch/backbone.safetensors`, as PyTorch saved it ([out, in]).
fn torch_fc1(o: usize, i: usize) -> f32 {
    (10 * o + i) as f32 / 100.0
}

/// A backbone read from a file saved by PyTorch when the crate compiles, into `static`s.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct FromTorch {
    #[frozen(torch = "tests/data/torch/backbone.safetensors")]
    fc1: Dense<4, 3, Tanh>,
    #[frozen(torch = "tests/data/torch/backbone.safetensors", key = "fc2")]
    mid: Dense<3, 2>,
    head: Dense<2, 3>,
}

/// The same layers in the parameter buffer, the backbone frozen there.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct InBuffer {
    #[frozen]
    fc1: Dense<4, 3, Tanh>,
    #[frozen]
    mid: Dense<3, 2>,
    head: Dense<2, 3>,
}

/// `fc1`'s parameters written by hand, in fusegraph's layout (weight [in, out], then bias).
static FC1: [f32; 15] = {
    let mut p = [0.0; 15];
    let mut k = 0;
    while k < 12 {
        let (i, o) = (k / 3, k % 3);
        p[k] = (10 * o + i) as f32 / 100.0;
        k += 1;
    }
    p[12] = 0.0;
    p[13] = -0.1;
    p[14] = -0.2;
    p
};

/// `fc1` in a `static` of the program.
#[fusegraph::model(loss = SoftmaxCrossEntropy)]
struct FromStatic {
    #[frozen(static = FC1)]
    fc1: Dense<4, 3, Tanh>,
    head: Dense<3, 3>,
}

#[test]
fn a_layer_read_from_a_pytorch_file_has_its_values_in_fusegraphs_layout() {
    let model = FromTorch::init(Seed(1));
    let w = model.fc1().weight();
    for i in 0..4 {
        for o in 0..3 {
            assert_eq!(
                w[i * 3 + o],
                torch_fc1(o, i),
                "fc1.weight[{o}][{i}] of the file"
            );
        }
    }
    assert_eq!(model.fc1().bias(), [0.0, -0.1, -0.2]);
    let mid = model.mid().weight();
    assert_eq!(
        mid[2 * 2 + 1],
        (1.0 - 2.0) / 4.0,
        "fc2.weight[1][2] of the file"
    );
    assert_eq!(model.mid().bias(), [0.5, -0.5]);
    // Only the head is in the parameter buffer.
    assert_eq!(FromTorch::PARAMS, 2 * 3 + 3);
    assert_eq!(FromTorch::TENSORS.len(), 2);
    assert_eq!(model.fc1().all(), FC1);
}

#[test]
fn layers_in_statics_train_as_the_same_layers_frozen_in_the_buffer() {
    let mut a = FromTorch::init(Seed(3));
    let mut b = InBuffer::init(Seed(0));
    let backbone = [a.fc1().all(), a.mid().all()].concat();
    b.params_mut()[..backbone.len()].copy_from_slice(&backbone);
    b.params_mut()[backbone.len()..].copy_from_slice(a.params());
    let rule = torch::Adam::default().with_lr(0.05);
    let mut step_a = TrainStep::<FromTorch, _, 4>::new(&a, rule);
    let mut step_b = TrainStep::<InBuffer, _, 4>::new(&b, rule);
    let mut rng = Rng::new(8);
    for _ in 0..3 {
        let x = rng.vec(4 * 4, 1.0);
        let y = [0u32, 2, 1, 1];
        let (la, lb) = (step_a.run(&mut a, &x, &y), step_b.run(&mut b, &x, &y));
        assert_eq!(la.to_bits(), lb.to_bits());
    }
    assert_eq!(bits(a.params()), bits(&b.params()[backbone.len()..]));
    let x = rng.vec(4 * 4, 1.0);
    assert_eq!(
        bits(step_a.input_gradient(&a, &x)),
        bits(step_b.input_gradient(&b, &x)),
        "the input gradient goes through the static layers"
    );

    let model = FromStatic::init(Seed(2));
    assert_eq!(model.fc1().all(), FC1);
    assert_eq!(
        model.fc1().weight(),
        FromTorch::init(Seed(2)).fc1().weight()
    );
    assert_eq!(FromStatic::PARAMS, 3 * 3 + 3);
    assert_eq!(TrainStep::<FromStatic, torch::Sgd, 4>::BYTES.frozen, 0);
}
