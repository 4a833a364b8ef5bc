//! Every message the macros emit, each saying what to write instead.

use proc_macro2::Span;
use syn::Error;

/// Errors collected during one phase, reported together.
#[derive(Default)]
pub struct Errors {
    errors: Vec<Error>,
}

impl Errors {
    pub fn push(&mut self, e: Error) {
        self.errors.push(e);
    }

    pub fn at(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.push(Error::new(span, msg));
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// All errors as one `syn::Error` (each keeps its span), or `Ok` when there are none.
    pub fn finish(self) -> Result<(), Error> {
        let mut it = self.errors.into_iter();
        match it.next() {
            None => Ok(()),
            Some(mut first) => {
                for e in it {
                    first.combine(e);
                }
                Err(first)
            }
        }
    }
}

pub const FUNCTIONS: &str =
    "sqrt, abs, signum, sign, min, max, exp, expm1, ln, powi, powf, tanh, sigmoid, softplus, erf, cosh, sinh, clamp, f64";

pub fn unknown_ident(name: &str, known: &str) -> String {
    format!("unknown identifier `{name}`; this block can read {known}")
}

pub fn used_before_let(name: &str) -> String {
    format!("`{name}` is used before its `let`; move the `let {name} = ...;` above this line")
}

pub fn unknown_function(name: &str) -> String {
    format!("`{name}` is not in the expression language; use one of: {FUNCTIONS}")
}

pub fn arity(name: &str, want: usize) -> String {
    let args = match want {
        1 => format!("`x.{name}()` or `{name}(x)`"),
        2 => format!("`x.{name}(y)` or `{name}(x, y)`"),
        3 => format!("`x.{name}(lo, hi)` or `{name}(x, lo, hi)`"),
        _ => format!("`{name}(x, steps, a, b, c)`"),
    };
    format!("`{name}` takes {want} argument(s): write {args}")
}

pub fn assign_readonly(name: &str, what: &str) -> String {
    match what {
        "gradient" => format!(
            "cannot assign to `{name}`: the gradient is read-only; bind the changed value with `let g2 = ...;` and use `g2`"
        ),
        "step number" => format!("cannot assign to `{name}`: the step number is counted by the runtime"),
        "hyper-parameter" => format!(
            "cannot assign to hyper-parameter `{name}`: hyper-parameters are fixed during a step; compute a new value in `step` with `let {name}_t = ...;`"
        ),
        "step scalar" => format!(
            "cannot assign to step scalar `{name}` here: step scalars are computed once in `step`; use a `let` in `update`"
        ),
        "parameter" => format!(
            "cannot assign to `{name}` in `step`: parameters are updated element-wise in `update`"
        ),
        "slot" => format!("cannot assign to slot `{name}` in `step`: slots are updated in `update`"),
        _ => format!(
            "cannot assign to `{name}`: `let` temporaries are immutable; write a new `let {name} = ...;`"
        ),
    }
}

pub fn element_in_step(name: &str) -> String {
    format!(
        "`{name}` is a per-element value and `step` runs once per step; move this computation into `update`"
    )
}

pub fn slot_init_reads(name: &str) -> String {
    let param = if name == "p" {
        ", or be `p` alone (a slot that starts as the parameter)"
    } else {
        ""
    };
    format!(
        "a slot's initial value cannot read `{name}`; initial values may use literals and hyper-parameters only{param}"
    )
}

pub fn duplicate(name: &str, first: &str) -> String {
    format!("`{name}` is already declared as {first}; give it another name")
}

pub fn reserved(name: &str) -> String {
    format!(
        "`{name}` is reserved (`p` parameter, `g` gradient, `t` step number); choose another name"
    )
}

pub fn hyper_type() -> &'static str {
    "hyper-parameters are `f32`: write `name: f32 = value` (use `if flag > 0.0 { .. } else { .. }` for switches)"
}

pub fn p_not_updated() -> &'static str {
    "`update` never assigns `p`, so the parameters would not change; add for example `p -= lr * g;`"
}

pub fn unsupported_expr() -> String {
    format!(
        "not in the expression language: use float literals, names, `+ - * /`, unary `-`, `if a > b {{ x }} else {{ y }}`, and {FUNCTIONS}"
    )
}

pub fn comparison_outside_if() -> &'static str {
    "a comparison is only allowed as the condition of `if a > b { x } else { y }`"
}

pub fn condition_not_comparison() -> &'static str {
    "an `if` condition must be one comparison (`>`, `<`, `>=`, `<=`, `==`, `!=`); nest `if`s to combine conditions"
}

pub fn unknown_section(name: &str) -> String {
    format!("unknown section `{name}`; an optimizer has `hyper {{ .. }}`, `slots {{ .. }}`, `carry {{ .. }}`, `views {{ .. }}`, `step {{ .. }}` and `update {{ .. }}`")
}

pub fn param_slot_shaped(name: &str) -> String {
    format!("`{name}` starts as the parameter, so it is shaped like it: write `{name} = p` without dimensions")
}

pub fn view_readable(hypers: &str, slots: &str) -> String {
    let hypers = name_group(", hyper-parameters (", hypers, ")");
    let slots = name_group(", element slots (", slots, ")");
    format!("literals, `p`{hypers}{slots}")
}

pub fn view_reads(name: &str) -> String {
    format!("a view cannot read `{name}`: it is a value of the parameters and their element slots (`p`, slots without dimensions) and the hyper-parameters, taken between steps")
}

pub fn view_shaped() -> &'static str {
    "a view is shaped like its parameter: write `name = expr` without dimensions"
}

pub fn missing_update() -> &'static str {
    "an optimizer needs an `update { .. }` section with the element-wise rule, for example `update { p -= lr * g; }`"
}

pub fn statement_form() -> &'static str {
    "a statement is `let name = expr;`, `name = expr;` or a compound assignment such as `name -= expr;`"
}

pub fn let_form() -> &'static str {
    "write `let name = expr;` (an optional `: f32` is allowed; patterns are not)"
}

pub fn too_many(what: &str, max: usize) -> String {
    format!("at most {max} {what} are supported")
}

pub fn default_literal() -> &'static str {
    "a default must be a number literal, for example `= 1e-3` or `= -0.5`"
}

pub fn precision() -> &'static str {
    "`step` takes an optional precision: `step { .. }` (f32) or `step(f64) { .. }`"
}

pub fn powi_exponent() -> &'static str {
    "`powi` takes an integer literal or a per-step scalar such as `t`; use `powf` for a per-element exponent"
}

pub fn powi_literal_range(max: i64) -> String {
    format!(
        "`powi` multiplies its base `|k|` times, so a literal exponent is at most {max} in magnitude; use `powf` for a larger one"
    )
}

pub fn powi_float_literal() -> &'static str {
    "`powi` takes an integer exponent: write `x.powi(2)`, or `x.powf(2.5)` for a fractional one"
}

pub fn powi_lane_literal() -> &'static str {
    "here `powi` takes an integer literal, such as `x.powi(3)` or `x.powi(-2)`; use `powf(x, k)` for a constant or computed exponent"
}

pub fn assign_in_step_target(name: &str) -> String {
    format!("`step` can assign only carried scalars (declared in `carry {{ .. }}`); bind `{name}` with `let` instead")
}

pub fn f64_of_lane() -> &'static str {
    "`f64(..)` computes a per-step scalar (from hyper-parameters, `t` and step scalars); it cannot read per-element values"
}

pub fn activation_one_variable() -> &'static str {
    "an activation has one variable: write `Name(x) = expr;`"
}

pub fn activation_duplicate(name: &str) -> String {
    format!(
        "`{name}` is already the variable, a constant or a learnable parameter; give it another name"
    )
}

pub fn learnable_empty() -> &'static str {
    "square brackets list learnable per-feature parameters with their initial values, such as `[alpha = 0.25]`; remove the empty `[]` for an activation without parameters"
}

pub fn learnable_without_value(name: &str) -> String {
    format!("learnable parameter `{name}` needs an initial value: write `[{name} = 0.25]`")
}

pub fn learnable_form(name: &str) -> String {
    format!(
        "a learnable parameter is its name and initial value (always `f32`, one per feature): write `[{name} = 0.25]`"
    )
}

pub fn learnable_literal(name: &str) -> String {
    format!(
        "the initial value of learnable parameter `{name}` must be a number literal, for example `[{name} = 0.25]` or `[{name} = -1.0]`"
    )
}

pub fn learnable_unread(name: &str) -> String {
    format!(
        "learnable parameter `{name}` is never read, so its gradient would be 0 and it would never change; use `{name}` in the expression, or remove it"
    )
}

pub fn learnable_zero_gradient(name: &str) -> String {
    format!(
        "the gradient with respect to learnable parameter `{name}` is 0 everywhere (it is only compared or passed to `sign`), so it would never change; use `{name}` in the value, or make it a constant `{{ {name}: f32 = .. }}`"
    )
}

pub fn activation_const_type(name: &str) -> String {
    format!("an activation's constants are `f32`: write `{name}: f32 = value`")
}

pub fn activation_const_default(name: &str) -> String {
    format!(
        "constant `{name}` needs a value: write `{name}: f32 = 0.01` (another value is another definition)"
    )
}

pub fn activation_f64() -> &'static str {
    "`f64(..)` computes an optimizer's per-step scalars; an activation computes in `f32` lanes: remove `f64(..)`"
}

pub fn activation_statement() -> &'static str {
    "an activation is one expression of its variable, such as `x * sigmoid(x)`; write temporaries inline (common sub-expressions are computed once) and choose with `if x > 0.0 { a } else { b }`"
}

pub fn unknown_model_option(name: &str) -> String {
    format!(
        "unknown model option `{name}`; write `loss = LossType`, and optionally `input = u32` (token ids), `graph(name = expr, ..)`, `inline`, and a memory budget `max_bytes = 65536, batch = 8, optimizer = fusegraph::optim::keras::Adam` (with `fused`)"
    )
}

pub fn unknown_input() -> String {
    "a model reads `f32` features or `u32` token ids: write `input = f32` (the default) or `input = u32`".to_string()
}

pub fn flag_with_value(name: &str) -> String {
    format!("`{name}` is a flag and takes no value: write `{name}` alone, or leave it out")
}

pub fn frozen_syntax() -> &'static str {
    "`#[frozen]` freezes the whole layer, `#[frozen(weight)]` or `#[frozen(weight, bias)]` the tensors named, `#[frozen(static = WEIGHTS)]` reads the layer from a `static` array, `#[frozen(torch = \"file.safetensors\")]` (with `key = \"prefix\"` if its keys do not start with the field's name) from a file saved by PyTorch"
}

pub fn weights_unreadable(file: &str, e: &std::io::Error) -> String {
    format!("cannot read `{file}` (relative to the crate's Cargo.toml): {e}")
}

pub fn weights_not_safetensors(file: &str, e: &dyn std::fmt::Display) -> String {
    format!("`{file}` is not a safetensors file ({e}): save it with `safetensors.torch.save_file(model.state_dict(), \"{file}\")`")
}

pub fn weights_dtype(key: &str, dtype: &str) -> String {
    format!("`{key}` is {dtype}; the layer reads F32: save the model as float32 (`model.float()`) before `save_file`")
}

pub fn weights_no_layer(file: &str, prefix: &str, keys: &[String]) -> String {
    let shown: Vec<&str> = keys.iter().take(8).map(String::as_str).collect();
    let more = if keys.len() > shown.len() {
        ", ..."
    } else {
        ""
    };
    format!(
        "`{file}` has no key starting with `{prefix}.`; its keys are {}{more}: write `key = \"...\"` with the prefix of this layer's keys",
        shown.join(", ")
    )
}

pub fn frozen_twice() -> &'static str {
    "a field takes one `#[frozen]`: list every tensor to freeze in it, `#[frozen(weight, bias)]`"
}

pub fn frozen_named_twice(name: &str) -> String {
    format!("`{name}` is named twice in `#[frozen(...)]`; keep one")
}

pub fn option_twice(name: &str) -> String {
    format!("`{name}` is given twice; keep one")
}

pub fn not_an_integer(name: &str, example: usize) -> String {
    format!("`{name}` takes an integer literal: write for example `{name} = {example}`")
}

pub fn batch_zero() -> &'static str {
    "`batch = 0` counts no samples; write the largest batch a step will see, such as `batch = 8`"
}

pub fn budget_without_batch() -> &'static str {
    "`max_bytes` needs `batch = N`: the budget counts activations for a batch of N samples; add for example `batch = 8`"
}

pub fn budget_without_optimizer() -> &'static str {
    "`max_bytes` needs `optimizer = Rule`: the budget counts the optimizer's slots; add for example `optimizer = fusegraph::optim::keras::Adam`"
}

pub fn without_budget(name: &str) -> String {
    format!(
        "`{name}` belongs to a memory budget; add `max_bytes = N` (with `batch` and `optimizer`), or remove `{name}`"
    )
}

pub fn loss_params() -> &'static str {
    "a loss takes two names in parentheses, the prediction and then the target: `(pred, target)`"
}

pub fn loss_never_reads(pred: &str) -> String {
    format!(
        "this loss never reads the prediction `{pred}`, so its gradient would be 0; write the loss as a function of `{pred}` (and the target)"
    )
}

pub fn loss_option(key: &str) -> String {
    format!(
        "unknown option `{key}`; after its expression a loss takes `reduce = mean` (the default) or `reduce = sum`"
    )
}

pub fn loss_reduce() -> &'static str {
    "`reduce` is `mean` (over the batch and the outputs, the default) or `sum`"
}

pub fn loss_const_type(name: &str) -> String {
    format!("a loss's constants are `f32`: write `{name}: f32 = value`")
}

pub fn const_collision(name: &str, first: &str, ident: &str) -> String {
    format!(
        "constants `{first}` and `{name}` would both be the associated constant `{ident}`; rename `{name}`"
    )
}

pub fn definition_twice(name: &str) -> String {
    format!("`{name}` is already defined in this invocation; give this definition another name")
}

pub fn loss_const_default(name: &str) -> String {
    format!("constant `{name}` needs a value: write `{name}: f32 = 1.0`")
}

pub fn loss_assign(name: &str) -> String {
    format!(
        "a loss body is `let`s and a final expression; write `let {name} = ...;` to bind a new value instead of assigning"
    )
}

pub fn loss_body_end() -> &'static str {
    "a loss body ends with its value, such as `{ let d = pred - target; d * d }`"
}

pub fn loss_f64() -> &'static str {
    "`f64(..)` computes an optimizer's per-step scalar; a loss is computed in `f32` lanes: leave out `f64(..)`"
}

pub fn section_twice(key: &str) -> String {
    format!("section `{key}` appears twice; merge the two into one")
}

pub fn if_without_else() -> &'static str {
    "an `if` is a select and needs an `else` branch: `if a > b { x } else { y }`"
}

pub fn if_branch_form() -> &'static str {
    "an `if` branch holds one expression, such as `{ x }`; compute temporaries with `let` before the `if`"
}

pub fn number_literal_only() -> &'static str {
    "only number literals are allowed, such as `0.9` or `1e-7`"
}

pub fn literal_overflow() -> &'static str {
    "this literal does not fit in an `f32`"
}

/// `a`, `b` as "`a`, `b`", the form the lists of readable names take.
pub fn quoted_list<T: std::fmt::Display>(names: impl IntoIterator<Item = T>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What an optimizer's slot and carried-scalar initial values can read.
pub fn optimizer_init_readable() -> &'static str {
    "literals and hyper-parameters"
}

/// `before names after`, or nothing when `names` is empty: a group of a list of readable names.
fn name_group(before: &str, names: &str, after: &str) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!("{before}{names}{after}")
    }
}

/// What an optimizer's `step` can read; `update` also reads `lane_names`, the step scalars, `p`,
/// `g` and the slots.
pub fn optimizer_readable(hypers: &str, carried: &str, lane_names: Option<(&str, &str)>) -> String {
    let mut s = format!("literals, hyper-parameters ({hypers}), `t`");
    s += &name_group(", carried scalars (", carried, ")");
    if let Some((step_scalars, slots)) = lane_names {
        s += &name_group(", step scalars (", step_scalars, ")");
        s += ", `p`, `g`";
        s += &name_group(", slots (", slots, ")");
    }
    s + " and earlier `let`s"
}

/// What an activation's expression can read.
pub fn activation_readable(var: &str, consts: &str, learnables: &str) -> String {
    let consts = name_group(", the constants ", consts, "");
    let learnables = name_group(", the learnable parameters ", learnables, "");
    format!("the variable `{var}`{consts}{learnables} and literals")
}

/// What a loss body can read.
pub fn loss_readable(pred: &str, target: &str, consts: &str) -> String {
    let consts = name_group("the constants (", consts, "), ");
    format!("the prediction `{pred}`, the target `{target}`, {consts}literals and earlier `let`s")
}

pub fn model_generic() -> &'static str {
    "a model cannot be generic: its shapes are the const parameters of its layer types"
}

pub fn model_fields() -> &'static str {
    "a model is a struct with named layer fields, such as `fc1: Dense<784, 128, Relu>`"
}

pub fn model_without_layers() -> &'static str {
    "a model needs at least one layer field, such as `fc1: Dense<784, 128, Relu>`"
}

pub fn not_a_layer_type(ty: &str) -> String {
    format!(
        "`{ty}` is not a layer type; a field is a layer such as `Dense<784, 128, Relu>` or `Conv2d<28, 28, 1, 8, 3, 3>`"
    )
}

pub fn model_without_loss() -> &'static str {
    "a model needs a loss: `#[model(loss = SoftmaxCrossEntropy)]` (or Mse, Mae, Huber, BinaryCrossEntropyWithLogits)"
}

pub fn softmax_outputs(n: usize) -> String {
    format!(
        "SoftmaxCrossEntropy needs at least 2 outputs (one per class) but the model gives {n}; use BinaryCrossEntropyWithLogits for one logit"
    )
}

pub fn sequence_outputs(n: usize, classes: usize) -> String {
    format!(
        "SequenceCrossEntropy<{classes}> reads the outputs as positions of {classes} logits but the model gives {n}, not a multiple of {classes}; end the model with [positions, {classes}] outputs or change the number of classes"
    )
}

/// The model's input, as what feeds the first layer of a sequential model.
pub fn model_input() -> &'static str {
    "the input"
}

/// The graph's input, as what feeds a layer.
pub fn graph_input() -> &'static str {
    "the input `x`"
}

/// A layer or node named as what feeds a layer.
pub fn feeding_layer(source: &str) -> String {
    format!("`{source}`")
}

/// `n` `thing`s, in the plural unless `n` is 1.
fn count(n: usize, thing: &str) -> String {
    match n {
        1 => format!("1 {thing}"),
        _ => format!("{n} {thing}s"),
    }
}

/// A flat shape, as what a layer reads or a node gives.
pub fn values(n: usize) -> String {
    format!("{} per sample", count(n, "value"))
}

/// A sequence, as what a layer reads or a node gives; with its values per sample when the
/// other side is flat.
pub fn positions(len: usize, features: usize, with_values: bool) -> String {
    let s = format!(
        "{} of {}",
        count(len, "position"),
        count(features, "feature")
    );
    match with_values {
        true => format!("{s} ({})", count(len * features, "value")),
        false => s,
    }
}

/// What to change in a layer that reads a sequence of `want` (length, features) from one of
/// `have`.
pub fn sequence_fix(want: (usize, usize), have: (usize, usize)) -> String {
    match (want.0 == have.0, want.1 == have.1) {
        (false, true) => format!("make its sequence length {}", have.0),
        (true, false) => format!("make it read {} per position", count(have.1, "feature")),
        _ => format!("make it read {}", positions(have.0, have.1, false)),
    }
}

/// What to change in a layer whose input size is one argument.
pub fn input_size_fix(n: usize) -> String {
    format!("make its input size {n}")
}

/// A change and the type that makes it.
pub fn write_type(change: &str, ty: &str) -> String {
    format!("{change}: write `{ty}`")
}

/// The change when the macro cannot write the layer's type: the layer's sizes or the source's.
pub fn change_either(layer: &str, source: &str) -> String {
    format!("change the sizes of `{layer}` or what {source} gives")
}

/// The other output of the recurrent layer `source`, which gives what the next layer reads.
pub fn other_output(source: &str, sequence: bool, ty: &str) -> String {
    match sequence {
        true => format!("output every position of `{source}`: write `{ty}`"),
        false => format!("output only the last hidden state of `{source}`: write `{ty}`"),
    }
}

/// A layer that reads `want` from `source`, which gives `have`; `fix` says what to write.
pub fn layer_reads(layer: &str, want: &str, source: &str, have: &str, fix: &str) -> String {
    format!("`{layer}` reads {want} but {source} gives {have}; {fix}")
}

/// The const assertion of a layer's input size, when the sizes are not literals.
pub fn layer_reads_differ(layer: &str, ty: &str, source: &str) -> String {
    format!(
        "`{layer}: {ty}` reads another number of values per sample than {source} gives; make the input sizes of `{ty}` what {source} gives"
    )
}

/// A size of 0 in a layer's type.
pub fn zero_size(layer: &str, ty: &str, size: &str) -> String {
    format!("`{layer}: {ty}`: {size} is 0; write a size of at least 1")
}

pub fn heads_do_not_divide(
    layer: &str,
    width: usize,
    heads: usize,
    other_heads: &str,
    other_width: &str,
) -> String {
    format!(
        "`{layer}` splits its {width} features per position into {heads} heads of equal size, but {heads} does not divide {width}; write `{other_heads}` (heads that divide {width}) or `{other_width}` (a width that {heads} heads divide)"
    )
}

pub fn table_too_short(layer: &str, table: usize, len: usize, fixed: &str) -> String {
    format!(
        "`{layer}` adds a row of its table to each of {len} positions but the table has {table} rows; make the table {len} rows long: write `{fixed}`"
    )
}

pub fn padding_outside(layer: &str, pad: usize, vocab: usize, fixed: &str) -> String {
    format!(
        "`{layer}`'s padding id {pad} is not one of its {vocab} token ids (0..{vocab}); write a padding id below {vocab}, or `{fixed}` for no padding"
    )
}

pub fn vocab_too_large(layer: &str, vocab: usize, max: u64) -> String {
    format!(
        "`{layer}` has {vocab} token ids but ids are `u32`, which address {max}; write a vocabulary of at most {max}"
    )
}

pub fn window_too_long(layer: &str, what: &str, k: usize, along: &str, n: usize) -> String {
    format!(
        "`{layer}`'s {what} spans {k} {along} but its input has {n}, and `Valid` padding keeps the {what} inside the input; make the {what} at most {n} long, or pad with `Same`"
    )
}

pub fn too_many_layers(layer: &str, layers: usize, max: usize) -> String {
    format!("`{layer}` stacks {layers} recurrent layers; write at most {max}")
}

pub fn dropout_rate(layer: &str, rate: usize) -> String {
    format!(
        "`{layer}` drops {rate} of every 1000 values, so nothing would pass; write a rate below 1000 per mille, such as 100 for 10%"
    )
}

pub fn layer_used_twice(layer: &str) -> String {
    format!(
        "layer `{layer}` is used twice; declare a second field for a second layer (weights are not shared)"
    )
}

pub fn node_twice(name: &str) -> String {
    format!("node `{name}` is defined twice; give the second one another name")
}

pub fn graph_empty() -> &'static str {
    "a graph needs at least one node: `graph(y = fc1(x))`"
}

pub fn graph_ignores_input() -> &'static str {
    "the graph never reads its input `x`"
}

pub fn node_unused(name: &str) -> String {
    format!(
        "node `{name}` is never used; the output is the last node, so use `{name}` in a later node or remove it"
    )
}

pub fn layer_unused(layer: &str) -> String {
    format!(
        "layer `{layer}` is not used by the graph; call it as `{layer}(node)` or remove the field"
    )
}

pub fn node_is_input() -> &'static str {
    "a node must compute something, such as `fc1(x)`; `x` itself is the input"
}

pub fn graph_node_form() -> &'static str {
    "a graph node is `layer(node)`, `node.relu()` (or another activation, `node.act::<Mish>()` for one of your own), `a + b`, `a * b` or `concat(a, b)`"
}

pub fn node_before_definition(name: &str) -> String {
    format!("node `{name}` is used before it is defined; move its definition above this one")
}

pub fn unknown_node(name: &str, defined: &[String]) -> String {
    format!(
        "unknown node `{name}`; the nodes defined so far are {}",
        defined.join(", ")
    )
}

pub fn concat_arity() -> &'static str {
    "`concat` joins two nodes: `concat(a, b)`"
}

pub fn not_a_layer(name: &str, layers: &str) -> String {
    format!("`{name}` is not a layer of this model; the layers are {layers}")
}

pub fn layer_arity(layer: &str) -> String {
    format!("a layer takes one node: `{layer}(h)`")
}

pub fn not_an_activation(name: &str) -> String {
    format!(
        "`{name}` is not an activation; use relu, leaky_relu, elu, sigmoid, tanh, gelu, swish or softmax, or `act::<YourActivation>()` for an activation of your own"
    )
}

pub fn activation_arguments(name: &str) -> String {
    format!("`.{name}()` takes no arguments")
}

pub fn unequal_shapes(op: &str, left: (&str, &str), right: (&str, &str)) -> String {
    format!(
        "`{op}` needs equal shapes, but the left side `{}` gives {} and the right side `{}` gives {}; make both sides give the same",
        left.0, left.1, right.0, right.1
    )
}

pub fn unequal_widths_differ(op: &str) -> String {
    format!("`{op}` needs equal widths on both sides")
}

pub fn tensor_step_outside_update() -> String {
    "reductions (`norm`, `rms`, `mean`, `sum`, `row_mean`, `col_mean`, `row_sum`, `col_sum`) \
     and `orthogonalize` are per-tensor steps of an optimizer's `update`: compute this value \
     there"
        .into()
}

pub fn matrix_step_without_branch() -> String {
    "`orthogonalize` needs a matrix, and this `update` also runs on tensors of other ranks: \
     write it in a branch `update name when rank == 2 { .. }` and give the other tensors a \
     branch of their own, `update other { .. }`"
        .into()
}

pub fn matrix_step_coefficient() -> String {
    "the iterations and coefficients of `orthogonalize` are per-step scalars: use literals, \
     hyper-parameters or `step` values here"
        .into()
}

pub fn reduction_of_uniform(name: &str) -> String {
    format!(
        "`{name}` reduces a value with one per element (or per row or column, for the \
         reductions over the whole tensor), and this one is the same across them: reduce an \
         expression of `p`, `g` or the slots"
    )
}

pub fn assign_kind(name: &str, target: &str, value: &str) -> String {
    format!(
        "`{name}` holds {target}, and this value has {value}: assign it a value with {target} \
         (or declare the slot with the shape this value has)"
    )
}

pub fn kind_description(kind: crate::expr::ir::Kind) -> &'static str {
    use crate::expr::ir::Kind;
    match kind {
        Kind::Scalar => "one value per step",
        Kind::Tensor => "one value per tensor",
        Kind::Row => "one value per row",
        Kind::Col => "one value per column",
        Kind::Lane => "one value per element",
    }
}

pub fn slot_shape() -> String {
    "a slot's shape is `[rows]`, `[cols]`, `[rows, 1]` or `[1, cols]` (a row or column \
     statistic), or none for one value per element"
        .into()
}

pub fn branch_name() -> String {
    "several `update` sections are branches: name each one, `update name when rank == 2 { .. }`, \
     and let the last, without `when`, take every other tensor"
        .into()
}

pub fn branch_condition() -> String {
    "a branch's condition compares `rank`, `rows`, `cols` or `numel` with a literal, such as \
     `rank == 2`"
        .into()
}

pub fn last_branch_condition() -> String {
    "the last `update` takes every tensor the branches before it do not: remove its `when`".into()
}

pub fn read_after_later_assignment(name: &str) -> String {
    format!(
        "`{name}` is assigned here in an earlier pass than a statement before it that reads \
         it (that statement waits for a reduction or a matrix step, so it would read the new \
         value): assign `{name}` after the statements that read it, or read it before the \
         reduction"
    )
}
