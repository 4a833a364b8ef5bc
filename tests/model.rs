//! Generated models: gradients against finite differences (weights and inputs), sequential
//! and graph forms, input gradients that follow the weights, training that learns, exact byte
//! counts, and construction of a large layer without touching the stack.

mod common;

use common::Rng;
use fusegraph::optim::keras;
use fusegraph::prelude::*;

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

/// The loss of a batch as a function of the parameters, through the public API.
fn loss_at<M: Model>(
    model: &mut M,
    step: &mut TrainStep<M, keras::Sgd, 8>,
    x: &[f32],
    y: &[<M::Loss as Loss>::Target],
) -> f64 {
    f64::from(step.gradients(model, x, y))
}

/// Central differences with step `h` on every parameter, against the backward pass.
fn check_weights<M: Model>(mut model: M, x: &[f32], y: &[<M::Loss as Loss>::Target]) {
    let mut step = TrainStep::<M, keras::Sgd, 8>::new(&model, keras::Sgd::default());
    step.gradients(&mut model, x, y);
    let analytic = step.grads().to_vec();
    let h = 1e-2_f32;
    let mut worst = 0.0f64;
    for (i, &backward) in analytic.iter().enumerate() {
        let orig = model.params()[i];
        model.params_mut()[i] = orig + h;
        let up = loss_at(&mut model, &mut step, x, y);
        model.params_mut()[i] = orig - h;
        let down = loss_at(&mut model, &mut step, x, y);
        model.params_mut()[i] = orig;
        let numeric = (up - down) / (2.0 * f64::from(h));
        let err = (numeric - f64::from(backward)).abs() / (numeric.abs().max(1e-2));
        worst = worst.max(err);
        assert!(
            err < 2e-2,
            "parameter {i}: backward {backward} vs differences {numeric}"
        );
    }
    assert!(
        worst > 0.0,
        "differences never moved: the check would be vacuous"
    );
}

fn data(rng: &mut Rng, n: usize) -> Vec<f32> {
    rng.vec(n, 1.0)
}

#[test]
fn sequential_gradients_match_finite_differences() {
    let mut rng = Rng::new(1);
    let model = Mlp::init(Seed(3));
    let x = data(&mut rng, 5 * 8);
    check_weights(model, &x, &[0, 3, 1, 2, 3]);
}

#[test]
fn residual_graph_gradients_match_finite_differences() {
    let mut rng = Rng::new(2);
    let x = data(&mut rng, 4 * 6);
    let y = data(&mut rng, 4 * 2);
    check_weights(ResMlp::init(Seed(4)), &x, &y);
}

#[test]
fn two_branch_graph_gradients_match_finite_differences() {
    let mut rng = Rng::new(3);
    let x = data(&mut rng, 3 * 4);
    check_weights(TwoBranch::init(Seed(5)), &x, &[2, 0, 1]);
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
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
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

#[test]
fn loss_input_gradients_match_finite_differences() {
    let mut rng = Rng::new(7);
    let model = ResMlp::init(Seed(10));
    let x = data(&mut rng, 3 * 6);
    let y = data(&mut rng, 3 * 2);
    let mut step = TrainStep::<ResMlp, keras::Sgd, 8>::new(&model, keras::Sgd::default());
    let dx = step.loss_input_gradient(&model, &x, &y).to_vec();
    let h = 1e-2;
    for i in 0..x.len() {
        let (mut up, mut down) = (x.clone(), x.clone());
        up[i] += h;
        down[i] -= h;
        let loss = |step: &mut TrainStep<ResMlp, keras::Sgd, 8>, x: &[f32]| {
            f64::from(step.evaluate(&model, x, &y).loss)
        };
        let numeric = (loss(&mut step, &up) - loss(&mut step, &down)) / (2.0 * f64::from(h));
        assert!(
            (numeric - f64::from(dx[i])).abs() < 2e-2 * numeric.abs().max(1e-1),
            "x[{i}]: {} vs {numeric}",
            dx[i]
        );
    }
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
