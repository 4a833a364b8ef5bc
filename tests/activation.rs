//! `activation!`: derivatives against f64 central differences (the built-ins rewritten with
//! the macro and user-style definitions), bit-for-bit agreement with the hand-written
//! activations, PyTorch's sub-gradients at kinks, which definitions save `z`, and models that
//! use macro activations in a `Dense` layer and as a layer of their own.

mod common;

use common::{bits, Rng};
use fusegraph::layers::{Backward, Forward};
use fusegraph::optim::keras;
use fusegraph::prelude::*;

fusegraph::activation! {
    /// ReLU, written to agree bit for bit with `layers::Relu`: `-0.0` and NaN pass through, as
    /// in `max(x, 0)`, and the derivative at 0 (and NaN) is 0. The plainer
    /// `if x > 0.0 { x } else { 0.0 }` has the same derivative but maps `-0.0` and NaN to `0.0`.
    pub MRelu(x) = if x > 0.0 { x } else { if x < 0.0 { 0.0 } else { x * 0.0 } };
    /// ReLU as usually written.
    pub PlainRelu(x) = if x > 0.0 { x } else { 0.0 };
    /// PyTorch's LeakyReLU (slope 0.01), as `layers::LeakyRelu` computes it.
    pub MLeaky { alpha: f32 = 0.01 } (x) = if x > 0.0 { x } else { x * alpha };
    /// ELU (alpha 1), as `layers::Elu` computes it.
    pub MElu(x) = if x > 0.0 { x } else { expm1(x) };
    /// GELU, exact (Keras' and PyTorch's default), as `layers::Gelu` computes its value.
    pub MGelu(x) = 0.5 * x * (1.0 + erf(x * 0.70710677));
    /// GELU, tanh approximation (PyTorch's `approximate='tanh'`).
    pub GeluTanh(x) = 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
    /// Softplus.
    pub MSoftplus(x) = softplus(x);
    /// Mish.
    pub Mish(x) = x * tanh(softplus(x));
    /// LeCun's scaled tanh, with constants.
    pub ScaledTanh { a: f32 = 1.7159, b: f32 = 0.6666667 } (x) = a * tanh(b * x);
    /// A rational function (softsign).
    pub Softsign(x) = x / (1.0 + abs(x));
    /// `x² sign(x)`.
    pub SignedSquare(x) = x * x * sign(x);
    /// Hard sigmoid, via `clamp`.
    pub HardSigmoid(v) = clamp(v / 6.0 + 0.5, 0.0, 1.0);
    /// `ln(1 + x²)`.
    pub LogOnePlusSquare(x) = ln(1.0 + x * x);
    /// `ln(cosh(x))`.
    pub LogCosh(x) = ln(cosh(x));
    /// A power with a scalar exponent and a cubic with a literal one.
    pub Powers { k: f32 = 1.5 } (x) = powf(abs(x) + 1.0, k) + x.powi(3);
    /// `abs`: derivative 0 at 0.
    pub Abs(x) = abs(x);
    /// `max` with a tie at 0.5: half the gradient to each side.
    pub MaxHalf(x) = max(x, 0.5);
    /// `min` with a tie everywhere: half through each side, 1 in all.
    pub MinSelf(x) = min(x, x);
    /// `clamp`: the gradient passes on its bounds.
    pub Clamp1(x) = x.clamp(-1.0, 1.0);
    /// `exp`: its derivative is its output.
    pub Exp(x) = exp(x);
}

/// `f(z)` and `f'(z)` through the slice API (which passes `y` as `z` when `NEEDS_Z` is false).
fn eval<A: Activation>(z: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut y = vec![0.0; z.len()];
    A::forward(z, &mut y, z.len());
    let mut dy = vec![1.0; z.len()];
    A::backward(z, &y, &mut dy, z.len());
    (y, dy)
}

/// Away from every kink of the definitions above (0, ±1, ±3, 0.5).
const POINTS: [f64; 14] = [
    -3.7, -2.3, -1.6, -0.8, -0.45, -0.2, -0.07, 0.06, 0.3, 0.7, 1.3, 2.2, 3.4, 4.1,
];

/// Forward against `f`, derivative against f64 central differences of `f`.
fn check<A: Activation>(f: impl Fn(f64) -> f64) {
    let z: Vec<f32> = POINTS.iter().map(|&v| v as f32).collect();
    let (y, dy) = eval::<A>(&z);
    for (i, &zi) in z.iter().enumerate() {
        let x = f64::from(zi);
        let want = f(x);
        let tol = 4e-6 * want.abs().max(1.0);
        assert!(
            (f64::from(y[i]) - want).abs() <= tol,
            "{}({x}) = {} vs {want}",
            A::NAME,
            y[i]
        );
        let h = 1e-4;
        let numeric = (f(x + h) - f(x - h)) / (2.0 * h);
        let tol = 2e-5 * numeric.abs().max(1.0);
        assert!(
            (f64::from(dy[i]) - numeric).abs() <= tol,
            "{}'({x}) = {} vs differences {numeric}",
            A::NAME,
            dy[i]
        );
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn softplus(x: f64) -> f64 {
    x.exp().ln_1p()
}

#[test]
fn built_ins_rewritten_match_finite_differences() {
    check::<MRelu>(|x| x.max(0.0));
    check::<PlainRelu>(|x| x.max(0.0));
    check::<MLeaky>(|x| if x > 0.0 { x } else { 0.01 * x });
    check::<MElu>(|x| if x > 0.0 { x } else { x.exp_m1() });
    check::<Sigmoid>(sigmoid);
    check::<Tanh>(f64::tanh);
    check::<Swish>(|x| x * sigmoid(x));
    let c = (2.0 / std::f64::consts::PI).sqrt();
    check::<GeluTanh>(|x| 0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh()));
    check::<MGelu>(|x| 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)));
    check::<MSoftplus>(softplus);
}

#[test]
fn user_definitions_match_finite_differences() {
    check::<Mish>(|x| x * softplus(x).tanh());
    check::<ScaledTanh>(|x| 1.7159 * (0.6666667 * x).tanh());
    check::<Softsign>(|x| x / (1.0 + x.abs()));
    check::<SignedSquare>(|x| x * x * x.signum());
    check::<HardSigmoid>(|x| (x / 6.0 + 0.5).clamp(0.0, 1.0));
    check::<LogOnePlusSquare>(|x| (x * x).ln_1p());
    check::<LogCosh>(|x| x.cosh().ln());
    check::<Powers>(|x| (x.abs() + 1.0).powf(1.5) + x * x * x);
    check::<Exp>(f64::exp);
    assert_eq!(ScaledTanh::A, 1.7159);
    assert_eq!(ScaledTanh::B, 0.6666667);
    assert_eq!(Powers::K, 1.5);
}

/// Many values: zeros, subnormals, extremes short of infinity, NaN, and random ones.
fn many() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-30,
        -1e-30,
        1.0,
        -1.0,
        80.0,
        -80.0,
        88.7,
        -88.7,
        100.0,
        -100.0,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN,
        f32::NAN,
        -f32::NAN,
    ];
    let mut rng = Rng::new(17);
    v.extend(rng.vec(200, 10.0));
    v.extend(rng.vec(100, 0.01));
    v
}

/// Bits, with every NaN the same (both sides NaN is agreement).
fn canonical(x: &[f32]) -> Vec<u32> {
    bits(
        &x.iter()
            .map(|&v| if v.is_nan() { f32::NAN } else { v })
            .collect::<Vec<_>>(),
    )
}

fn same_bits<A: Activation, B: Activation>() {
    let z = many();
    let (ya, da) = eval::<A>(&z);
    let (yb, db) = eval::<B>(&z);
    assert_eq!(canonical(&ya), canonical(&yb), "{} forward", A::NAME);
    assert_eq!(canonical(&da), canonical(&db), "{} derivative", A::NAME);
}

/// The built-ins that `activation!` writes, as they were written by hand: the macro must give
/// them the same bits, the same `NEEDS_Z` (what layers save) and the same names. Swish's is in
/// tests/expansion.rs, as what the macro should emit for it.
mod hand {
    use fusegraph::layers::Elementwise;
    use fusegraph_runtime::lane::{self, Lane};

    /// The logistic function; its derivative `y (1 - y)` reads the output only.
    pub struct Sigmoid;

    impl Elementwise for Sigmoid {
        const NAME: &'static str = "sigmoid";
        const NEEDS_Z: bool = false;
        fn lane<L: Lane>(z: L) -> L {
            lane::sigmoid(z)
        }
        fn lane_grad<L: Lane>(_z: L, y: L) -> L {
            y * (L::ONE - y)
        }
    }

    /// The hyperbolic tangent; its derivative `1 - y²` reads the output only.
    pub struct Tanh;

    impl Elementwise for Tanh {
        const NAME: &'static str = "tanh";
        const NEEDS_Z: bool = false;
        fn lane<L: Lane>(z: L) -> L {
            z.tanh()
        }
        fn lane_grad<L: Lane>(_z: L, y: L) -> L {
            L::ONE - y * y
        }
    }
}

/// `A` and `B` give the same bits and save the same, under the same name.
fn same_activation<A: Activation, B: Activation>() {
    same_bits::<A, B>();
    assert_eq!(A::NAME, B::NAME);
    assert_eq!(A::NEEDS_Z, B::NEEDS_Z, "{}", A::NAME);
}

#[test]
fn built_ins_written_with_the_macro_agree_with_their_hand_written_forms() {
    same_activation::<Sigmoid, hand::Sigmoid>();
    same_activation::<Tanh, hand::Tanh>();
}

#[test]
fn macro_definitions_agree_bit_for_bit_with_the_hand_written_ones() {
    same_bits::<MRelu, Relu>();
    same_bits::<MLeaky, LeakyRelu>();
    same_bits::<MElu, Elu>();
    // GELU's value is the same bits; its derivative, Φ(x) + x φ(x), rounds in another order
    // than the derivative of the formula (2/√π e^(-u²) / √2 for φ), within a few ulps.
    let z = many();
    let (ya, da) = eval::<MGelu>(&z);
    let (yb, db) = eval::<Gelu>(&z);
    assert_eq!(canonical(&ya), canonical(&yb), "gelu forward");
    for ((a, b), x) in da.iter().zip(&db).zip(&z) {
        assert!(
            (a - b).abs() <= 4.0 * f32::EPSILON * b.abs().max(1.0) || (a.is_nan() && b.is_nan()),
            "gelu derivative at {x}: {a} vs {b}"
        );
    }
    assert_eq!(<MElu as Activation>::NAME, "m_elu");
    assert_eq!(
        <LogOnePlusSquare as Activation>::NAME,
        "log_one_plus_square"
    );
}

#[test]
fn derivatives_read_y_where_they_can() {
    const {
        // sigmoid' = y (1 - y), tanh' = 1 - y², exp' = y: the layers need not save z.
        assert!(!<Sigmoid as Activation>::NEEDS_Z);
        assert!(!<Tanh as Activation>::NEEDS_Z);
        assert!(!<Exp as Activation>::NEEDS_Z);
        // Swish' = s + y (1 - s) still needs s = sigmoid(z), as the hand-written one does.
        assert!(<Swish as Activation>::NEEDS_Z);
        assert!(<Mish as Activation>::NEEDS_Z);
        // The condition `x > 0` reads z; the hand-written ReLU knows that `y > 0` is the same
        // test, which the macro does not derive.
        assert!(<MRelu as Activation>::NEEDS_Z && !<Relu as Activation>::NEEDS_Z);
    }
    // Reading z from y: the backward pass is given y in place of z and still agrees.
    let z = [-2.0f32, -0.3, 0.0, 0.4, 3.0];
    let (y, _) = eval::<Tanh>(&z);
    let mut dy = vec![1.0; z.len()];
    Tanh::backward(&[], &y, &mut dy, z.len());
    for (d, y) in dy.iter().zip(&y) {
        assert_eq!(*d, 1.0 - y * y);
    }
}

fn grad_at<A: Activation>(z: f32) -> f32 {
    eval::<A>(&[z]).1[0]
}

#[test]
fn sub_gradients_at_kinks_follow_pytorch() {
    assert_eq!(grad_at::<MRelu>(0.0), 0.0);
    assert_eq!(grad_at::<MRelu>(-0.0), 0.0);
    assert_eq!(grad_at::<PlainRelu>(0.0), 0.0);
    assert_eq!(grad_at::<PlainRelu>(1e-30), 1.0);
    assert_eq!(grad_at::<MLeaky>(0.0), 0.01);
    assert_eq!(grad_at::<Abs>(0.0), 0.0);
    assert_eq!(grad_at::<Abs>(-2.0), -1.0);
    assert_eq!(grad_at::<Clamp1>(-1.0), 1.0);
    assert_eq!(grad_at::<Clamp1>(1.0), 1.0);
    assert_eq!(grad_at::<Clamp1>(1.5), 0.0);
    assert_eq!(grad_at::<Clamp1>(-1.5), 0.0);
    assert_eq!(grad_at::<HardSigmoid>(3.0), 1.0 / 6.0);
    assert_eq!(grad_at::<HardSigmoid>(-3.0), 1.0 / 6.0);
    assert_eq!(grad_at::<HardSigmoid>(3.5), 0.0);
    assert_eq!(grad_at::<MaxHalf>(0.5), 0.5);
    assert_eq!(grad_at::<MaxHalf>(0.6), 1.0);
    assert_eq!(grad_at::<MaxHalf>(0.4), 0.0);
    assert_eq!(grad_at::<MinSelf>(0.3), 1.0, "half through each side");
    assert_eq!(grad_at::<SignedSquare>(0.0), 0.0);
    assert_eq!(grad_at::<MElu>(0.0), 1.0, "exp(0) from the else branch");
}

/// Macro activations in a `Dense` layer and as layers of their own.
#[fusegraph::model(loss = Mse)]
pub struct Custom {
    fc1: Dense<4, 8, Mish>,
    act: Act<Swish, 8>,
    fc2: Dense<8, 8, ScaledTanh>,
    act2: Act<LogOnePlusSquare, 8>,
    fc3: Dense<8, 2>,
}

#[test]
fn a_model_with_macro_activations_has_the_gradients_of_finite_differences() {
    let mut rng = Rng::new(8);
    let x = rng.vec(5 * 4, 1.0);
    let y = rng.vec(5 * 2, 1.0);
    common::check_weights(&mut Custom::init(Seed(2)), &x, &y, 1e-2);
}

/// The loss of `x`, `y` before and after 200 Adam steps (learning rate 0.01) on it.
fn train<M: Model<Input = f32>>(model: &mut M, x: &[f32], y: &[common::Target<M>]) -> (f32, f32) {
    let mut step =
        TrainStep::<M, keras::Adam, 16>::new(model, keras::Adam::default().with_lr(0.01));
    let before = step.evaluate(model, x, y).loss;
    for _ in 0..200 {
        step.run(model, x, y);
    }
    (before, step.evaluate(model, x, y).loss)
}

#[test]
fn a_model_with_macro_activations_trains() {
    let mut rng = Rng::new(9);
    let x = rng.vec(16 * 4, 1.0);
    let y: Vec<f32> = x
        .chunks(4)
        .flat_map(|r| [r[0] * r[1], r[2] - r[3]])
        .collect();
    let (before, after) = train(&mut Custom::init(Seed(4)), &x, &y);
    assert!(after < 0.3 * before, "{before} -> {after}");
}

fusegraph::activation! {
    /// PyTorch's PReLU with one slope per feature.
    pub PRelu[alpha = 0.25](x) = if x > 0.0 { x } else { alpha * x };
    /// A learnable scaled tanh with a fixed linear leak: constants and learnable parameters
    /// together.
    pub LearnedTanh { c: f32 = 0.1 } [a = 1.0, b = 0.5] (x) = a * tanh(b * x) + c * x;
}

/// Workspace for calling a layer's passes directly (the per-feature layers use none).
fn with_ctx<R>(f: impl FnOnce(&mut fusegraph::layers::Ctx<'_>) -> R) -> R {
    let mut rng = fusegraph::Rng::new(Seed(0));
    f(&mut fusegraph::layers::Ctx {
        gemm: &mut [],
        scratch: &mut [],
        rng: &mut rng,
        first_sample: 0,
        mode: fusegraph::layers::Mode::Train,
        lengths: fusegraph::layers::Lengths::FULL,
    })
}

#[test]
fn learnable_parameters_make_a_layer_generic_over_its_features() {
    use fusegraph::layers::Init;
    const {
        assert!(<PRelu<11> as Layer>::IN == 11 && <PRelu<11> as Layer>::OUT == 11);
        assert!(<PRelu<11> as Layer>::PARAMS == 11 && <PRelu<11> as Layer>::SAVED == 0);
        assert!(<LearnedTanh<5> as Layer>::PARAMS == 10);
    }
    let t = <PRelu<11> as Layer>::TENSORS;
    assert_eq!((t.len(), t[0].name, t[0].shape), (1, "alpha", &[11][..]));
    assert_eq!(t[0].init, Init::constant(0.25));
    let t = <LearnedTanh<5> as Layer>::TENSORS;
    let names: Vec<_> = t.iter().map(|t| (t.name, t.init)).collect();
    assert_eq!(
        names,
        [("a", Init::constant(1.0)), ("b", Init::constant(0.5))]
    );
    assert_eq!(LearnedTanh::<5>::C, 0.1);
}

#[test]
fn prelu_forward_and_backward_match_a_scalar_reference() {
    const N: usize = 11; // a tail of 3 after one lane
    const B: usize = 3;
    let mut rng = Rng::new(21);
    let alpha: Vec<f32> = rng.vec(N, 0.5);
    let mut x = rng.vec(B * N, 2.0);
    x[0] = 0.0; // the kink: PyTorch's PReLU'(0) is the slope
    let mut y = vec![0.0; B * N];
    with_ctx(|ctx| {
        let io = Forward {
            params: &alpha,
            state: &mut [],
            x: &x,
            y: &mut y,
            saved: &mut [],
            batch: B,
        };
        <PRelu<N> as Layer>::forward(ctx, io)
    });
    for (i, (&x, &y)) in x.iter().zip(&y).enumerate() {
        let want = if x > 0.0 { x } else { alpha[i % N] * x };
        assert_eq!(y.to_bits(), want.to_bits(), "y[{i}]");
    }
    let dy0 = rng.vec(B * N, 1.0);
    let mut dy = dy0.clone();
    let mut dx = vec![f32::NAN; B * N];
    let mut da = vec![f32::NAN; N];
    with_ctx(|ctx| {
        let io = Backward {
            params: &alpha,
            x: &x,
            y: &y,
            saved: &[],
            dy: &mut dy,
            dx: fusegraph::layers::Grad::Set(&mut dx),
            frozen: fusegraph::layers::Frozen::NONE,
            dparams: &mut da,
            batch: B,
        };
        <PRelu<N> as Layer>::backward(ctx, io);
    });
    for i in 0..B * N {
        let want = dy0[i] * if x[i] > 0.0 { 1.0 } else { alpha[i % N] };
        assert_eq!(dx[i].to_bits(), want.to_bits(), "dx[{i}]");
    }
    // The slope's gradient, summed sample after sample in f32: the same bits.
    for (j, da) in da.iter().enumerate() {
        let want = (0..B).fold(0.0f32, |s, r| {
            let i = r * N + j;
            s + dy0[i] * if x[i] > 0.0 { 0.0 } else { x[i] }
        });
        assert_eq!(da.to_bits(), want.to_bits(), "dalpha[{j}]");
    }
    assert_eq!(dx[0], dy0[0] * alpha[0]);
}

/// A PReLU between two dense layers.
#[fusegraph::model(loss = Mse)]
pub struct PReluNet {
    fc1: Dense<4, 8>,
    act: PRelu<8>,
    fc2: Dense<8, 2>,
}

/// The same with the learnable scaled tanh.
#[fusegraph::model(loss = Mse)]
pub struct TanhNet {
    fc1: Dense<4, 8>,
    act: LearnedTanh<8>,
    fc2: Dense<8, 2>,
}

/// Where the activation's parameters sit in the flat buffer: after `fc1`.
const ACT: usize = <Dense<4, 8> as Layer>::PARAMS;

/// Every parameter's gradient and the loss's input gradient against f64 central differences
/// of the loss; `act` is a distinct value per activation parameter (away from PReLU's slope 1,
/// where it would be the identity).
fn check_model<M: Model<Loss = Mse, Input = f32>>(mut model: M, act: &[f32]) {
    model.params_mut()[ACT..ACT + act.len()].copy_from_slice(act);
    let mut rng = Rng::new(31);
    let x = rng.vec(6 * 4, 1.5);
    let y = rng.vec(6 * 2, 1.0);
    let h = 1e-3;
    let analytic = common::check_weights(&mut model, &x, &y, h);
    let slopes = &analytic[ACT..ACT + act.len()];
    assert!(
        slopes.iter().filter(|g| g.abs() > 1e-4).count() > act.len() / 2,
        "the activation's gradients must not be vacuous: {slopes:?}"
    );
    common::check_loss_input_gradient(&model, &x, &y, h, 1e-2);
}

#[test]
fn prelu_gradients_match_finite_differences_through_a_model() {
    let slopes: Vec<f32> = (0..8).map(|i| 0.1 + 0.08 * i as f32).collect();
    check_model(PReluNet::init(Seed(3)), &slopes);
}

#[test]
fn two_learnable_parameters_match_finite_differences_through_a_model() {
    let ab: Vec<f32> = (0..16).map(|i| 0.6 + 0.05 * i as f32).collect();
    check_model(TanhNet::init(Seed(4)), &ab);
}

#[test]
fn slope_gradients_are_the_same_bits_on_one_and_two_threads() {
    let mut rng = Rng::new(41);
    let x = rng.vec(8 * 4, 1.5);
    let y = rng.vec(8 * 2, 1.0);
    let grads = |threads: usize| {
        common::on_threads(threads, || {
            let mut model = PReluNet::init(Seed(5));
            let mut step = TrainStep::<PReluNet, keras::Sgd, 8>::new(&model, keras::Sgd::default());
            let loss = step.gradients(&mut model, &x, &y);
            (loss.to_bits(), bits(step.grads()))
        })
    };
    let one = grads(1);
    assert_eq!(one, grads(2), "1 vs 2 threads");
    assert_eq!(one, grads(1), "the same batch again");
    assert!(one.1[ACT..ACT + 8].iter().any(|&g| g != 0));
}

#[test]
fn a_model_with_prelu_trains_and_its_slopes_move() {
    let mut rng = Rng::new(9);
    let x = rng.vec(16 * 4, 1.0);
    let y: Vec<f32> = x
        .chunks(4)
        .flat_map(|r| [r[0] * r[1], (r[2] - r[3]).abs()])
        .collect();
    let mut model = PReluNet::init(Seed(4));
    assert!(model.params()[ACT..ACT + 8].iter().all(|&a| a == 0.25));
    let (before, after) = train(&mut model, &x, &y);
    assert!(after < 0.3 * before, "{before} -> {after}");
    let slopes = &model.params()[ACT..ACT + 8];
    assert!(
        slopes.iter().all(|&a| (a - 0.25).abs() > 1e-3),
        "every slope learns: {slopes:?}"
    );
}

/// The f64 twins of the expression language's free functions, for the table below: the
/// same text, read as Rust over `f64`, is the reference.
mod reference {
    pub fn sqrt(x: f64) -> f64 {
        x.sqrt()
    }
    pub fn abs(x: f64) -> f64 {
        x.abs()
    }
    pub fn signum(x: f64) -> f64 {
        x.signum()
    }
    pub fn sign(x: f64) -> f64 {
        if x > 0.0 {
            1.0
        } else if x < 0.0 {
            -1.0
        } else {
            0.0
        }
    }
    pub fn min(a: f64, b: f64) -> f64 {
        a.min(b)
    }
    pub fn max(a: f64, b: f64) -> f64 {
        a.max(b)
    }
    pub fn exp(x: f64) -> f64 {
        x.exp()
    }
    pub fn expm1(x: f64) -> f64 {
        x.exp_m1()
    }
    pub fn ln(x: f64) -> f64 {
        x.ln()
    }
    pub fn powf(x: f64, y: f64) -> f64 {
        x.powf(y)
    }
    pub fn powi(x: f64, k: i32) -> f64 {
        x.powi(k)
    }
    pub fn tanh(x: f64) -> f64 {
        x.tanh()
    }
    pub fn cosh(x: f64) -> f64 {
        x.cosh()
    }
    pub fn sinh(x: f64) -> f64 {
        x.sinh()
    }
    pub fn sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }
    pub fn softplus(x: f64) -> f64 {
        x.max(0.0) + (-x.abs()).exp().ln_1p()
    }
    pub fn erf(x: f64) -> f64 {
        libm::erf(x)
    }
    pub fn clamp(x: f64, lo: f64, hi: f64) -> f64 {
        x.clamp(lo, hi)
    }
}

use std::f64::consts::{FRAC_1_SQRT_2, SQRT_2};

/// One row of the derivative table: the name, the f64 reference (the same expression), the
/// domain sampled and the kinks kept away from.
struct Row {
    name: &'static str,
    f: fn(f64) -> f64,
    domain: (f64, f64),
    kinks: &'static [f64],
    forward: Eval,
}

/// `f(z)` and `f'(z)` of a slice, as `eval` gives them.
type Eval = fn(&[f32]) -> (Vec<f32>, Vec<f32>);

/// Defines each expression once as an activation and once as its f64 reference.
macro_rules! derivative_table {
    ($x:ident; $($name:ident [$lo:expr, $hi:expr] [$($k:expr),*] => $e:expr;)*) => {
        fusegraph::activation! { $(#[doc = stringify!($e)] pub $name($x) = $e;)* }

        fn table() -> Vec<Row> {
            #[allow(unused_imports, clippy::all)]
            use reference::*;
            vec![$(Row {
                name: stringify!($name),
                f: |$x: f64| -> f64 { $e },
                domain: ($lo, $hi),
                kinks: &[$($k),*],
                forward: eval::<$name>,
            }),*]
        }
    };
}

derivative_table! { x;
    D01 [-4.0, 4.0] [] => sqrt(1.0 + x * x) / (2.0 + tanh(x));
    D02 [-3.0, 3.0] [] => powf(x * x + 1.0, 0.3);
    D03 [-3.0, 3.0] [-1.0, 2.0] => clamp(x, -1.0, 2.0) * exp(-x);
    D04 [-3.0, 4.0] [0.0, 2.0] => min(x, 0.5 * x * x);
    D05 [-6.0, 6.0] [] => ln(1.0 + softplus(x));
    D06 [-2.5, 2.5] [] => erf(x) * sinh(x);
    D07 [-3.0, 3.0] [0.0] => expm1(x) / (1.0 + abs(x));
    D08 [-3.0, 3.0] [-0.4, 0.0, 0.4] => x.powi(-3);
    D09 [-3.0, 3.0] [1.0] => if x < 1.0 { x * x } else { 2.0 * x - 1.0 };
    D10 [-3.0, 3.0] [-1.618034, 0.618034] => max(x * x, 1.0 - x);
    D11 [-3.0, 3.0] [] => cosh(x) - sinh(x) * 0.5;
    D12 [-4.0, 4.0] [] => sigmoid(x) * tanh(2.0 * x);
    D13 [-4.0, 4.0] [] => x / (1.0 + x * x);
    D14 [-4.0, 4.0] [] => (x - 1.0) * (x + 2.0) / (3.0 + x * x);
    D15 [-3.0, 3.0] [] => -x * exp(-(x * x));
    D16 [-3.0, 3.0] [] => abs(x) * x;
    D17 [-3.0, 3.0] [0.0] => signum(x) * x * x;
    D18 [-3.0, 3.0] [0.0] => sign(x) * sqrt(abs(x) + 1.0);
    D19 [-3.0, 3.0] [] => x.powi(3) - 2.0 * x.powi(2) + x;
    D20 [-2.0, 2.0] [0.0] => powf(abs(x) + 0.5, x);
    D21 [-4.0, 4.0] [] => ln(cosh(x) + 1.0);
    D22 [-5.0, 5.0] [] => exp(x) / (1.0 + exp(x));
    D23 [-5.0, 5.0] [] => softplus(-x) + softplus(x);
    D24 [-3.0, 3.0] [] => tanh(tanh(tanh(x)));
    D25 [-3.0, 3.0] [] => sqrt(sqrt(x * x + 1.0));
    D26 [-3.0, 3.0] [] => (1.0 - x) * (1.0 - x) * (1.0 - x);
    D27 [-4.0, 4.0] [] => 1.0 / (1.0 + exp(-x)) - sigmoid(x) + x;
    D28 [-2.0, 3.0] [0.0] => if x > 0.0 { ln(1.0 + x) } else { expm1(x) };
    D29 [-3.0, 3.0] [-0.5, 0.5278640] => min(max(x, -0.5), 0.5 + x * x * 0.1);
    D30 [-2.5, 2.5] [-1.7320508, -FRAC_1_SQRT_2, FRAC_1_SQRT_2, 1.7320508] =>
        clamp(x * x - 1.0, -0.5, 2.0);
    D31 [-3.0, 3.0] [] => erf(x * 0.5) + x.powi(2) * 0.1;
    D32 [-3.0, 3.0] [-0.4, 0.0, 0.4] => x * x.powi(-2);
    D33 [-3.0, 3.0] [] => sinh(x) / cosh(x) - tanh(x) + x * x;
    D34 [-3.0, 3.0] [] => powf(2.0, x);
    D35 [-3.0, 3.0] [] => exp(x).sqrt() * 2.0;
    D36 [-3.0, 3.0] [-0.3, 0.3] => x.abs().max(0.3);
    D37 [0.1, 3.0] [] => x.powf(2.5) - x.sqrt();
    D38 [-3.0, 3.0] [-SQRT_2, SQRT_2] =>
        if x * x > 2.0 { sigmoid(x) } else { -x * 0.5 };
    D39 [-3.0, 3.0] [] => -(-x) * 3.0 - x / 4.0;
    D40 [-0.9, 3.0] [] => (x + 1.0).ln() * (x + 1.0);
    D41 [-3.0, 3.0] [-1.0, 1.0] => min(x, 1.0) * max(x, -1.0);
    D42 [-3.0, 3.0] [0.0] =>
        if x > 0.0 { sqrt(1.0 + x * x) } else { sqrt(1.0 + x * x) * x };
    D43 [-3.0, 3.0] [-1.0, 1.0] => clamp(x, -1.0, 1.0).powi(2) + clamp(x, -1.0, 1.0) * x;
    D44 [-3.0, 3.0] [] => (x * x + 1.0).powi(-2) * (x * x + 1.0);
    D45 [-2.0, 2.0] [] => exp(sinh(x) * 0.5) / (cosh(x) + sigmoid(x * x));
    D46 [-3.0, 3.0] [0.0] => x.powi(4) * sign(x) - abs(x * x * x) / 3.0;
    D48 [-3.0, 3.0] [] => powi(x + 2.0, 3) / 8.0 - powi(x, 2);
    D47 [-3.0, 3.0] [-0.4, 0.0, 0.4] => 2.0f64.sqrt() * x + x.powi(-(2)) * 0.0625;
}

/// Every definition of the table, at random points of its domain away from its kinks (fixed
/// seeds): the value against the f64 reference, the derivative against f64 central
/// differences of it.
#[test]
fn derivatives_of_random_expressions_match_central_differences() {
    let rows = table();
    assert!(rows.len() >= 30);
    for (seed, row) in rows.iter().enumerate() {
        let mut rng = Rng::new(1000 + seed as u64);
        let (lo, hi) = row.domain;
        let mut z = Vec::new();
        while z.len() < 41 {
            let u = f64::from(rng.next_f32()) * 0.5 + 0.5;
            let v = (lo + (hi - lo) * u) as f32;
            if row.kinks.iter().all(|k| (f64::from(v) - k).abs() > 0.02) {
                z.push(v);
            }
        }
        let (y, dy) = (row.forward)(&z);
        for (i, &zi) in z.iter().enumerate() {
            let x = f64::from(zi);
            let want = (row.f)(x);
            assert!(
                (f64::from(y[i]) - want).abs() <= 2e-5 * want.abs().max(1.0),
                "{}({x}) = {} vs {want}",
                row.name,
                y[i]
            );
            let h = 1e-5;
            let numeric = ((row.f)(x + h) - (row.f)(x - h)) / (2.0 * h);
            assert!(
                (f64::from(dy[i]) - numeric).abs() <= 1e-4 * numeric.abs().max(1.0),
                "{}'({x}) = {} vs central differences {numeric}",
                row.name,
                dy[i]
            );
        }
    }
}

fusegraph::activation! {
    /// `sqrt(x + 0)`: `+0` at `x = -0`, so its derivative there is `+inf`.
    pub SqrtPlusZero(x) = sqrt(x + 0.0);
    /// `1 / (x + 0)`: `+inf` at `x = -0`, as at `+0`.
    pub RecipPlusZero(x) = 1.0 / (x + 0.0);
}

/// The simplifier must not fold `x + 0` to `x`: at `x = -0` the derivative of `sqrt(x + 0)`
/// would become `0.5 / sqrt(-0) = -inf` instead of `+inf`.
#[test]
fn derivatives_keep_the_sign_of_zero() {
    let (y, dy) = eval::<SqrtPlusZero>(&[-0.0, 0.0]);
    assert_eq!(bits(&y), bits(&[0.0, 0.0]));
    assert_eq!(dy, [f32::INFINITY, f32::INFINITY]);
    let (y, dy) = eval::<RecipPlusZero>(&[-0.0, 0.0, 2.0]);
    assert_eq!(y, [f32::INFINITY, f32::INFINITY, 0.5]);
    assert_eq!(dy[2], -0.25);
    assert_eq!(dy[0], dy[1], "-0 and +0 give the same derivative");
}
