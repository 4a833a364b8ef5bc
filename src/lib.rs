//! fusegraph compiles training code: declarative models and optimizer rules become statically
//! typed Rust whose state is allocated once and whose update is one fused SIMD/rayon pass.
//!
//! # Optimizers
//!
//! [`optimizer!`] turns an element-wise rule, or one that reads per-tensor values (norms, row
//! and column statistics, a Newton-Schulz matrix step), into a hyper-parameter struct that
//! implements [`optim::Rule`]; [`optim::Optimizer`] owns the state (one buffer per slot,
//! allocated once) and runs the fused pass. The built-ins in [`optim::keras`], [`optim::torch`]
//! and [`optim::optax`] are written with the same macro.
//!
//! ```
//! fusegraph::optimizer! {
//!     /// Plain SGD with heavy-ball momentum.
//!     pub struct Momentum {
//!         hyper  { lr: f32 = 0.1, beta: f32 = 0.9 }
//!         slots  { v = 0.0 }
//!         update {
//!             v = beta * v + g;
//!             p -= lr * v;
//!         }
//!     }
//! }
//!
//! let mut params = vec![1.0_f32; 10];
//! let mut opt = fusegraph::optim::Optimizer::new(Momentum::default().with_lr(0.5), &[10]);
//! for _ in 0..3 {
//!     let grads: Vec<f32> = params.iter().map(|p| 2.0 * p).collect(); // d/dp of p^2
//!     opt.step(&mut params, &grads);
//! }
//! assert!(params[0].abs() < 1.0);
//! assert_eq!(opt.slot("v").unwrap().len(), 10);
//! ```
//!
//! # Models
//!
//! [`macro@model`] turns a struct of layers into a model that owns one flat parameter buffer; its
//! shapes are constants of the layer types, so a layer that does not fit the previous one is a
//! compile error at its field. [`TrainStep`] owns everything else a step needs (gradients,
//! activations for batches up to `B`, workspace, the optimizer's state), allocated once; `run`
//! does the forward pass, the loss, the backward pass and the optimizer's fused update,
//! allocating nothing.
//!
//! ```
//! use fusegraph::optim::keras::Adam;
//! use fusegraph::prelude::*;
//!
//! /// Four classes from eight features.
//! #[fusegraph::model(loss = SoftmaxCrossEntropy)]
//! pub struct Mlp {
//!     fc1: Dense<8, 16, Relu>,
//!     fc2: Dense<16, 4>,
//! }
//!
//! /// The same with a residual connection, as a graph.
//! #[fusegraph::model(loss = SoftmaxCrossEntropy, graph(h = fc1(x).relu(), r = fc2(h).tanh() + h, y = head(r)))]
//! pub struct ResMlp {
//!     fc1: Dense<8, 16>,
//!     fc2: Dense<16, 16>,
//!     head: Dense<16, 4>,
//! }
//!
//! let mut model = Mlp::init(Seed(7));
//! let mut step = TrainStep::<_, _, 32>::new(&model, Adam::default().with_lr(0.01));
//! let x: Vec<f32> = (0..4 * 8).map(|i| (i % 8) as f32 / 8.0).collect();
//! let y = [0, 1, 2, 3];
//! let first = step.run(&mut model, &x, &y);
//! for _ in 0..50 {
//!     step.run(&mut model, &x, &y);
//! }
//! assert!(step.evaluate(&model, &x, &y).loss < first);
//! let dx = step.input_gradient(&model, &x); // d sum(output) / d x, from the current weights
//! assert_eq!(dx.len(), x.len());
//! assert_eq!(model.fc1().weight().len(), 8 * 16);
//! // Bytes of parameters, gradients, activations, workspace and optimizer slots:
//! let bytes = TrainStep::<Mlp, Adam, 32>::BYTES;
//! assert_eq!(bytes.slots, 2 * bytes.grads);
//! # let _ = ResMlp::init(Seed(1));
//! ```
//!
//! # More
//!
//! - [`guide`]: the chapters of the guide (models and layers, optimizers, sequence models,
//!   training, training without an allocator, data-parallel training, custom layers, CPUs and
//!   bits, the golden check, the architecture).
//! - [`activation!`] and [`loss!`]: custom activations and losses written as formulas, whose
//!   derivatives the macros derive symbolically when the crate compiles.
//! - [`fit::Trainer`] (feature `std`): `fit`, `evaluate` and `predict` over a
//!   [`data::Dataset`], with metrics, callbacks and progress; [`checkpoint`] (feature
//!   `checkpoint`): safetensors files that resume bit for bit.
//! - [`train::EmbeddedStep`]: training without an allocator, for `inline` models, in one arena
//!   the caller owns.
#![no_std]

extern crate self as fusegraph;

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod guide;
pub mod prelude;

pub use fusegraph_runtime::accumulate;
#[cfg(feature = "checkpoint")]
pub use fusegraph_runtime::checkpoint;
#[cfg(feature = "std")]
pub use fusegraph_runtime::data;
pub use fusegraph_runtime::distributed;
#[cfg(feature = "std")]
pub use fusegraph_runtime::fit;
#[cfg(feature = "std")]
pub use fusegraph_runtime::fs;
pub use fusegraph_runtime::kernels;
pub use fusegraph_runtime::lane;
pub use fusegraph_runtime::layers;
pub use fusegraph_runtime::loss;
pub use fusegraph_runtime::optim;
pub use fusegraph_runtime::rng::{Rng, Seed};
pub use fusegraph_runtime::train;
pub use fusegraph_runtime::train::{Bytes, Model, NamedTensor, View};
#[cfg(feature = "alloc")]
pub use fusegraph_runtime::train::{Evaluation, TrainStep};

/// Compiles an optimizer rule, element-wise or per tensor, into a typed optimizer.
///
/// ```
/// fusegraph::optimizer! {
///     /// Adam as Keras 3 computes it (epsilon outside the bias correction).
///     pub struct KerasAdam {
///         hyper  { lr: f32 = 1e-3, beta1: f32 = 0.9, beta2: f32 = 0.999, eps: f32 = 1e-7 }
///         slots  { m = 0.0, v = 0.0 }
///         step   { let alpha = lr * (1.0 - beta2.powi(t)).sqrt() / (1.0 - beta1.powi(t)); }
///         update {
///             m += (g - m) * (1.0 - beta1);
///             v += (g * g - v) * (1.0 - beta2);
///             p -= alpha * m / (v.sqrt() + eps);
///         }
///     }
/// }
///
/// let adam = KerasAdam::default().with_lr(0.01);
/// assert_eq!(adam.lr, 0.01);
/// let mut opt = fusegraph::optim::Optimizer::new(adam, &[3, 2]);
/// let mut params = [1.0_f32; 5];
/// opt.step(&mut params, &[0.1, -0.2, 0.3, 0.0, 1.0]);
/// assert!(params[0] < 1.0 && params[1] > 1.0 && params[3] == 1.0);
/// ```
///
/// # Sections
///
/// - `hyper { name: f32 = default, .. }`: the hyper-parameters. They become `pub` fields of the
///   struct, with `Default`, a builder `with_name(value)` each, and by-name access through
///   [`optim::Rule::hyper`] and [`optim::Rule::set_hyper`]. The learning rate is the one named
///   `lr` (schedules and decoupled weight decay use it): the rule's
///   [`optim::Rule::learning_rate`] reads its field, and the macro implements
///   [`optim::LearningRate`] for a rule with one, which the learning-rate callbacks of `fit`
///   require (a rule without one does not compile with them, and an optimizer refuses a schedule
///   for it when it is built).
/// - `slots { name = init, .. }`: per-element state, one `f32` buffer as long as the parameters
///   each, allocated once by [`optim::Optimizer`]. `init` may read hyper-parameters
///   (`accumulator = initial_accumulator_value`). A slot may be shaped per tensor instead:
///   `name: [rows] = init` keeps one value per row (`[rows, 1]` the same, kept as a column, as
///   PyTorch's `row_var`), `[cols]` or `[1, cols]` one per column, and `[rows, cols]` one per
///   element, as without dimensions. `name = p` starts as the parameter: the first step copies
///   each tensor's parameters into it ([`optim::Optimizer::start_from`] does it before).
/// - `carry { name = init, .. }`: per-optimizer scalar state, updated in `step` (Nadam's running
///   product of momentum factors).
/// - `views { name = expr, .. }`: other values of the parameters that the state holds, such as
///   schedule-free's average `eval_params = (p - (1.0 - b1) * z) / b1`: element-wise
///   expressions of `p`, the element slots and the hyper-parameters, taken between steps with
///   [`optim::Optimizer::view`] (the index of the view in [`optim::Rule::VIEWS`]).
/// - `step { .. }` or `step(f64) { .. }`: runs once per step. `let` statements compute scalars
///   from hyper-parameters, carried scalars and `t`, the 1-based step number; compound
///   assignments update carried scalars. With `(f64)`, scalars are computed in `f64` from each
///   hyper-parameter widened to the decimal it was written as (`0.999` stays `0.999`), as PyTorch
///   computes them from Python floats; otherwise in `f32`, as Keras does.
/// - `update { .. }`: the rule over `p` (the parameter), `g` (its gradient, read only) and the
///   slots. Statements run in order; a slot read after its assignment sees the new value. `let`
///   binds temporaries; `p` must be assigned. Without per-tensor values (below) the rule is
///   element-wise.
/// - Branches: `update factored when rank == 2 { .. } update unfactored { .. }`, each named. A
///   tensor takes the first branch whose condition holds (`rank`, `rows`, `cols` or `numel`
///   compared with a literal), else the last, which has no condition. A branch without a
///   condition before the last is taken only by route: [`optim::Optimizer::with_routes`] names
///   a branch for some tensors (`&[(tensor_index, "branch")]`: Keras' `exclude_layers`, optax's
///   masks). Slots are shared by name; a tensor keeps a slot only if its branch reads or
///   assigns it.
///
/// # Expressions
///
/// Float (or integer) literals, names, `+ - * /`, unary `-`, and the functions `sqrt`, `abs`,
/// `signum` (Rust's: `1` at `+0.0`), `sign` (PyTorch's: `0` at zero), `min`, `max`, `exp`,
/// `expm1`, `ln`, `powi`, `powf`, `tanh`, `sigmoid`, `softplus`, `erf`, `cosh`, `sinh`,
/// `clamp`, as methods (`v.sqrt()`) or calls (`sqrt(v)`). `if a > b { x } else { y }` (also
/// `<`, `>=`, `<=`, `==`, `!=`) is a select: both sides are computed, no branch. `x.powi(k)`
/// with an integer literal (at most 64 in magnitude) multiplies; with a scalar such as `t` it
/// is `powf`, which rounds once where repeated multiplication would not.
/// `f64(expr)` computes a scalar expression in `f64` from the decimal values of the
/// hyper-parameters and rounds it once, as Python computes `1 - beta_1` from floats (Keras'
/// `1 - 0.999` is `0.001`; `1.0 - 0.999_f32` is 1.3e-5 off).
///
/// Every scalar sub-expression of `update` (such as `1.0 - beta1`) is computed once per step, in
/// `step`'s precision, and stored in the step struct; the lane code reads it as a splat. No
/// `mul_add` is emitted: each operation rounds, as in the frameworks.
///
/// `update` also reads per-tensor values, which make the rule tensor-wise:
/// - reductions over the tensor: `norm(x)` (`sqrt(sum(x * x))`), `rms(x)`, `mean(x)`,
///   `sum(x)`, of a value with one per element, row or column (`mean(r)` of a row slot);
/// - row and column statistics of a value with one per element: `row_mean(x)` and `row_sum(x)`
///   (over the last axis, one value per row), `col_mean(x)` and `col_sum(x)` (one per column);
///   a row value with a column value makes one per element, their outer product;
/// - the tensor's dimensions `rows` (the product of every axis but the last), `cols` (the last
///   axis), `numel` and `rank`, as `f32`;
/// - the matrix step `orthogonalize(x, steps, a, b, c)`: `steps` Newton-Schulz iterations
///   (`a X + (b A + (c A) A) X` with `A = X Xᵀ`, as Keras and optax compute them) on the
///   crate's GEMM, with per-step scalars for `steps` and the coefficients; only in a branch
///   `when rank == 2`.
///
/// `p` or a slot takes a value of its own shape or one the same across it: a per-tensor value
/// fits a row slot, a value with one per element does not.
///
/// ```
/// use fusegraph::optim::{Config, Optimizer, Rule, Shape};
///
/// fusegraph::optimizer! {
///     /// SGD with LAMB's trust ratio on matrices: each matrix's step is scaled by
///     /// `||p|| / ||g||`; every other tensor takes plain SGD.
///     pub struct TrustSgd {
///         hyper { lr: f32 = 0.1 }
///         update trusted when rank == 2 {
///             let g_norm = norm(g);
///             let ratio = if g_norm > 0.0 { norm(p) / g_norm } else { 1.0 };
///             p -= lr * ratio * g;
///         }
///         update plain {
///             p -= lr * g;
///         }
///     }
/// }
///
/// // A 2x3 weight and its bias, one after the other in the flat buffer.
/// let shapes = [Shape::matrix(2, 3), Shape::vector(3)];
/// let mut opt = Optimizer::with_shapes(TrustSgd::default(), &shapes, Config::default());
/// assert_eq!(TrustSgd::BRANCHES, ["trusted", "plain"]);
/// assert_eq!((opt.tensor_branch(0), opt.tensor_branch(1)), (Some(0), Some(1)));
/// let start = [1.0_f32, 2.0, 2.0, 0.0, 0.0, 4.0, 1.0, 1.0, 1.0];
/// let grads = [0.3_f32, 0.0, 0.4, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5];
/// let mut params = start;
/// opt.step(&mut params, &grads);
/// // ||p|| = 5 and ||g|| = 0.5: the weight moves ten times as far as plain SGD moves it.
/// let ratio = 5.0_f32 / 0.5;
/// assert!((params[0] - (1.0 - 0.1 * ratio * 0.3)).abs() < 1e-6);
/// assert!((params[2] - (2.0 - 0.1 * ratio * 0.4)).abs() < 1e-6);
/// assert_eq!(params[6], 1.0 - 0.1 * 0.5);
///
/// // Routed to `plain` (Keras' `exclude_layers`), the weight takes the plain step.
/// let routes = [(0, "plain")];
/// let mut opt = Optimizer::with_routes(TrustSgd::default(), &shapes, &routes, Config::default())?;
/// let mut params = start;
/// opt.step(&mut params, &grads);
/// assert_eq!(params[0], 1.0 - 0.1 * 0.3);
/// # Ok::<(), fusegraph::optim::StateError>(())
/// ```
///
/// # What it generates
///
/// The struct with its `Default` and builders, and, inside `const _: () = { .. };`, a step
/// struct of the per-step scalars and an implementation of [`optim::Rule`]: names of the
/// hyper-parameters, slots and carried scalars, `begin_step` (the `step` block plus the lifted
/// scalars; the decimal values of the hyper-parameters it reads in `f64` are kept in
/// `Decimals` between steps and computed again only when a hyper-parameter changes) and `update` (the `update` block on lanes of any [`lane::Lane`] type, inlined into
/// the fused pass, which runs it on AVX2 registers where the CPU has them and the build's
/// `wide` does not use them; see [`lane`]). `cargo expand` shows it.
///
/// A rule with per-tensor values, slot shapes or branches sets [`optim::Rule::TENSOR_WISE`] and
/// implements, besides, `BRANCHES`, `SLOT_SHAPES`, `branch` (the conditions), `slot_len`,
/// `work_len` and `update_tensor`, which [`optim::Optimizer`] calls a tensor at a time (the
/// gradient transforms, weight decay and EMA of its [`optim::Config`] around it). Each branch
/// is planned into passes over the tensor when the crate compiles: a statement runs in the
/// pass after the last reduction or matrix step its value waits for, so a LAMB step is two
/// passes (the moments and the sums of `p * p` and `u * u`, then the step with the ratio).
/// Each pass is one loop over the tensor's lanes (row by row where it reads row or column
/// values) that runs that pass's statements in program order and adds up the reductions it
/// feeds; per-tensor values are computed between passes, and a `let` that a later pass reads
/// is computed again there. A sum takes the values in the tensor's order into eight `f32`
/// sums, as an `f32x8` pass would, widened every 256 values into an [`accumulate`] total, so
/// that it has the same bits on every lane type and thread count. The scratch (row and column
/// statistics, a matrix step's argument and the Newton-Schulz products) is allocated once, for
/// the largest tensor. Slots that start as the parameter are [`optim::Rule::PARAM_SLOTS`], and
/// views are [`optim::Rule::VIEWS`] with [`optim::Rule::view`], on lanes.
///
/// # Errors
///
/// Mistakes are compile errors on the offending token that say what to write instead: an
/// unknown name, an assignment to `g`, `t`, a hyper-parameter or a temporary, a per-element
/// value in `step`, a function outside the language, a duplicate or reserved name, a
/// hyper-parameter that is not `f32`, an `update` that never assigns `p`. For per-tensor
/// rules: a reduction or matrix step outside `update`, a reduction of a value that is the same
/// for every element, a value with one per element assigned to a row or column slot, a slot
/// shape other than the five, `orthogonalize` outside a branch `when rank == 2`, several
/// `update`s without names, a condition other than a dimension compared with a literal, a
/// condition on the last branch, and an assignment that a statement before it would see
/// because it waits for a reduction (it runs in a later pass). A slot that starts as the
/// parameter with dimensions, and a view that reads `g`, `t`, a `step` value, a carried
/// scalar or a slot with dimensions, are errors too.
pub use fusegraph_macros::optimizer;

/// Compiles element-wise activation functions, written as one expression each, into layer
/// activations whose derivatives are derived symbolically when the crate compiles.
///
/// ```
/// use fusegraph::prelude::*;
///
/// fusegraph::activation! {
///     /// SiLU: `x * sigmoid(x)`.
///     pub Silu(x) = x * sigmoid(x);
///     /// Mish: `x * tanh(softplus(x))`.
///     pub Mish(x) = x * tanh(softplus(x));
///     /// A leaky ReLU with its slope as a constant.
///     pub Leaky { alpha: f32 = 0.2 } (x) = if x > 0.0 { x } else { alpha * x };
/// }
///
/// #[fusegraph::model(loss = Mse)]
/// pub struct Net {
///     fc1: Dense<4, 8, Silu>,
///     fc2: Dense<8, 8, Mish>,
///     fc3: Dense<8, 1, Leaky>,
/// }
///
/// let z = [-1.0_f32, 0.0, 2.0];
/// let mut y = [0.0; 3];
/// Leaky::forward(&z, &mut y, 3);
/// assert_eq!(y, [-0.2, 0.0, 2.0]);
/// assert_eq!(Leaky::ALPHA, 0.2);
/// assert_eq!(<Silu as Activation>::NAME, "silu");
/// let mut dy = [1.0; 3];
/// Leaky::backward(&z, &y, &mut dy, 3);
/// assert_eq!(dy, [0.2, 0.2, 1.0]); // PyTorch's convention: 0 takes the `else` branch
/// # let _ = Net::init(Seed(1));
/// ```
///
/// # Definitions
///
/// `Name(x) = expr;`, or `Name { constant: f32 = value, .. } (x) = expr;` with constants,
/// each with its doc comments and visibility; any number per invocation. The variable may have
/// any name. A constant becomes an associated constant of the type, in upper case
/// (`Leaky::ALPHA`): the type is zero-sized, so another value is another definition.
///
/// # Learnable parameters
///
/// Parameters in square brackets, with their initial values, are learned, one per feature:
/// `pub PRelu[alpha = 0.25](x) = if x > 0.0 { x } else { alpha * x };` (constants may come
/// first: `Name { c: f32 = 1.0 } [a = 0.5] (x) = ..;`). Such a definition is a layer generic
/// over its number of features, `PRelu<N>` (a field of a `#[fusegraph::model]`, with one `[N]`
/// tensor per parameter, named as written and initialized to its value); the gradient with
/// respect to each parameter is derived as well and summed over the batch in sample order, so
/// it has the same bits whatever the number of threads.
///
/// ```
/// use fusegraph::prelude::*;
///
/// fusegraph::activation! {
///     /// PyTorch's PReLU, one slope per feature.
///     pub PRelu[alpha = 0.25](x) = if x > 0.0 { x } else { alpha * x };
/// }
///
/// #[fusegraph::model(loss = Mse)]
/// pub struct Net {
///     fc1: Dense<4, 8>,
///     act: PRelu<8>,
///     fc2: Dense<8, 1>,
/// }
///
/// let model = Net::init(Seed(1));
/// assert_eq!(model.act().tensor("alpha"), Some(&[0.25_f32; 8][..]));
/// ```
///
/// # Expressions
///
/// The language of [`optimizer!`]'s `update`, over the variable, the constants and literals:
/// `+ - * /`, unary `-`, `if a > b { x } else { y }` (a select, both sides computed), and
/// `sqrt, abs, signum, sign, min, max, exp, expm1, ln, powi, powf, tanh, sigmoid, softplus, erf,
/// cosh, sinh, clamp`, as methods or calls. `softplus(x)` is `ln(1 + e^x)`, computed stably;
/// `expm1(x)` is `e^x - 1`, accurate near 0; `erf` is the error function. `x.powi(k)` takes an
/// integer literal `k` (at most 64 in magnitude) and multiplies; use `powf` for other
/// exponents.
///
/// # Derivatives
///
/// Derived by the usual rules with PyTorch's sub-gradients at kinks: an `if` takes the
/// derivative of the branch its condition selects (`if x > 0.0 { x } else { 0.0 }` has
/// derivative 0 at 0), `abs'(0) = 0`, `clamp` passes the gradient on its bounds, `min` and
/// `max` split it in half on a tie, `sign`, `signum` and comparisons have derivative 0. Terms
/// of constants are left out rather than multiplied by 0, so `alpha * x` has derivative
/// `alpha` even where `x` is infinite. The result is simplified (literal arithmetic, `x * 1`,
/// `x - 0`..., never `x + 0`, which is `+0` where `x` is `-0`, nor `0 * x`, which IEEE makes NaN
/// for infinite `x`).
///
/// # What it generates
///
/// For each definition, a `#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]` unit struct
/// and, inside `const _: () = { .. };`, an implementation of
/// [`Elementwise`](layers::Elementwise) (hence [`Activation`](layers::Activation), usable in
/// `Dense<IN, OUT, Name>` and wherever an activation is): `NAME` in snake case, `lane` (the
/// expression on lanes of any [`Lane`](lane::Lane) type, so that the layers run it on the
/// widest registers the CPU has, with the same bits) and `lane_grad`. Sub-expressions
/// used more than once are computed once into a `let`; in the derivative, a sub-expression
/// equal to the whole forward expression reads `y`, the output that the backward pass already
/// holds, and when the derivative then no longer reads `x`, `NEEDS_Z` is `false` and layers do
/// not save their pre-activations (`sigmoid`, `tanh`, `exp`). `x * sigmoid(x)` becomes
///
/// ```text
/// fn lane<L: Lane>(x: L) -> L { x * lane::sigmoid(x) }
/// fn lane_grad<L: Lane>(z: L, y: L) -> L {
///     let s = lane::sigmoid(z);
///     s + y * (L::splat(1.0) - s)
/// }
/// ```
///
/// # Errors
///
/// Anything outside the language is a compile error on the offending token that says what to
/// write instead: an unknown function or method, a name that is neither the variable nor a
/// constant, a statement or an assignment, a wrong number of arguments, a constant that is not
/// `f32` or has no value. The type is still defined, so one mistake gives one error.
pub use fusegraph_macros::activation;

/// Declares a model: a struct of layers becomes a type that owns one flat parameter buffer,
/// with generated forward and backward passes for [`TrainStep`].
///
/// See the [crate documentation](crate#models) for a first example.
///
/// # Options
///
/// `#[fusegraph::model(loss = Loss, ..)]` names the loss, then optionally:
/// - `graph(name = expr, ..)`: the wiring of a non-sequential model. A node is `layer(node)`,
///   `node.relu()` (or `leaky_relu`, `elu`, `sigmoid`, `tanh`, `gelu`, `swish`, `softmax`),
///   `node.act::<T>()` (any [`Activation`](layers::Activation) in scope, such as one of
///   [`activation!`]), `a + b`, `a * b` or `concat(a, b)`; `x` is the input and the last node
///   the output.
/// - `inline`: parameters and state live in arrays inside the struct (`[f32; PARAMS]` and
///   `[f32; STATE]`, sizes computed from the layer types) instead of two heap buffers, so the
///   model needs no allocator: it can be a `static` (from the `const fn zeroed()`) or live on
///   the stack. Without `inline` (the default) the buffers are allocated on the heap without
///   passing through the stack, which a large model needs.
/// - `max_bytes = N, batch = B, optimizer = Rule`, and optionally `fused`: a memory budget
///   checked when the crate compiles. The model and a train step of `Rule` for batches of `B`
///   ([`Bytes::of`], counting only the largest layer's gradients with `fused`) must fit in
///   `N` bytes, or the build fails at `N` with the total and each part. The bytes counted
///   are the model's `BUDGET_BYTES`.
///
/// # What it generates
///
/// The struct, and inside `const _: () = { .. };` (`cargo expand` shows it):
/// - `init(seed)`, a model whose parameters come from each layer's initializer, tensor by
///   tensor from its own random stream of `seed`; `init_in_place(&mut self, seed)`, the same
///   values without building a new model; with `inline`, `const fn zeroed()`;
/// - `params()`, `params_mut()`, and one accessor per layer (`model.fc1().weight()`);
/// - an implementation of [`Model`]: the buffer sizes as constants, the tensor tables, and
///   one forward and one backward pass with one statement per node, so that the code grows
///   linearly with the model (the backward pass hands each layer's gradient to the step's
///   [`train::GradSink`]: stored, or applied to that layer at once);
/// - with a budget, `BUDGET_BYTES` and the constant that checks it.
///
/// ```
/// use fusegraph::optim::keras::Adam;
/// use fusegraph::prelude::*;
///
/// /// A model for a microcontroller: no allocator, 64 KiB for it and its training.
/// #[fusegraph::model(loss = Mse, inline, max_bytes = 65536, batch = 8, optimizer = Adam)]
/// pub struct Tiny {
///     fc1: Dense<8, 16, Relu>,
///     fc2: Dense<16, 4>,
/// }
///
/// static INITIAL: Tiny = Tiny::zeroed();
///
/// let mut model = Tiny::init(Seed(1));
/// assert_eq!(core::mem::size_of::<Tiny>(), Tiny::BUDGET_BYTES.params);
/// assert!(Tiny::BUDGET_BYTES.total() <= 65536);
/// assert!(INITIAL.params().iter().all(|&p| p == 0.0));
/// model.init_in_place(Seed(2));
/// assert_eq!(model.params(), Tiny::init(Seed(2)).params());
/// ```
pub use fusegraph_macros::model;

/// Compiles element-wise losses of a prediction and a target into unit structs implementing
/// [`loss::Loss`]; the gradient with respect to the prediction is derived symbolically when the
/// crate compiles.
///
/// ```
/// use fusegraph::loss::Loss;
///
/// fusegraph::loss! {
///     /// `ln(cosh(pred - target))`: quadratic near the target, linear far from it.
///     pub LogCosh(pred, target) = ln(cosh(pred - target));
///
///     /// Huber loss with a constant `delta`.
///     pub Huber2 { delta: f32 = 2.0 } (pred, target) = {
///         let d = abs(pred - target);
///         if d <= delta { 0.5 * d * d } else { delta * (d - 0.5 * delta) }
///     };
///
///     /// Squared error summed (not averaged) over the batch and the outputs.
///     pub SumSquared(pred, target) = (pred - target) * (pred - target), reduce = sum;
/// }
///
/// let (pred, target) = ([0.5, -1.0, 3.0], [0.0, 0.0, 0.0]);
/// let mut grad = [0.0; 3];
/// let loss = SumSquared::loss_and_grad(&pred, &target, &mut grad, 3);
/// assert_eq!(loss, 0.25 + 1.0 + 9.0);
/// assert_eq!(grad, [1.0, -2.0, 6.0]);
/// assert_eq!(Huber2::DELTA, 2.0);
/// assert!(LogCosh::loss(&pred, &target, 3) < Huber2::loss(&pred, &target, 3));
/// ```
///
/// # Syntax
///
/// One or more definitions, each `attributes visibility Name { constants } (pred, target) =
/// body, options;`:
/// - `(pred, target)` names the prediction and the target, in this order (any two names).
///   Targets are real values, one per output (`Target = f32`).
/// - `{ name: f32 = literal, .. }`, optional: constants of the loss. [`loss::Loss`]'s
///   functions take no `self`, so constants are fixed when the crate compiles; each is also an
///   associated constant in upper case (`Huber2::DELTA`). For another value, declare another
///   loss.
/// - The body is an expression of the language (below), or a block of `let`s ending with one:
///   `{ let d = pred - target; d * d }`.
/// - `reduce = mean` (the default: the mean over the batch and the outputs, as the built-in
///   losses, Keras and PyTorch reduce) or `reduce = sum`.
///
/// # Expressions
///
/// As in [`optimizer!`]: literals, the two names, the constants, `let`s, `+ - * /`, unary `-`,
/// `if a > b { x } else { y }` (a select), and `sqrt`, `abs`, `signum`, `sign`, `min`, `max`,
/// `exp`, `expm1`, `ln`, `powi` (an integer literal exponent, at most 64 in magnitude),
/// `powf`, `tanh`, `sigmoid`, `softplus`, `erf`, `cosh`, `sinh`, `clamp`.
///
/// # Gradients
///
/// The derivative by `pred` is derived symbolically and simplified; at non-differentiable
/// points it follows PyTorch: `abs` has derivative 0 at 0 (so `abs(pred - target)` gives
/// `torch.nn.L1Loss`'s 0 where `pred == target`), `min`/`max` give half to each side on a tie,
/// an `if` takes the derivative of the branch it selects.
///
/// # What it generates
///
/// For each definition, the unit struct (with `Clone, Copy, Debug, Default, PartialEq, Eq`), its
/// constants, and inside `const _: () = { .. };` two `#[inline(always)]` functions on lanes of
/// any [`lane::Lane`] type, one for the value and one for the value and the derivative (each
/// sub-expression they share, such as `pred - target`, computed once), and an implementation of
/// [`loss::Loss`] that hands them to the runtime's lane passes of element-wise losses: one pass
/// over the slices on the lanes of the process's [`lane::Capability`], the tail
/// padded into a lane and left out of the sum, each element's value computed in `f32` and summed
/// in `f64` in a fixed order; the gradient is the derivative divided by the count for `mean`.
/// `correct` returns `None`.
///
/// # Errors
///
/// A name other than the two parameters, the constants and earlier `let`s, a function or
/// construct outside the language, a loss that never reads `pred`, parameters other than two
/// names, a constant that is not an `f32` literal, and an unknown option are compile errors on
/// the offending tokens.
pub use fusegraph_macros::loss;

/// What generated code names; not a stable API.
#[doc(hidden)]
pub use fusegraph_runtime::__private_0_1;

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
