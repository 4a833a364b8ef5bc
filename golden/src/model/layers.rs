//! A sequential model read from a case's `model.layers` at run time: each layer's sizes
//! ([`DenseDims`], [`ConvDims`], [`RnnDims`]) and activation, checked against the shapes flowing
//! through the stack, and the parameter tensors in layer order (`{layer}.kernel`,
//! `{layer}.bias`, each in Keras' layout, which is fusegraph's; a GRU's or LSTM's
//! `{layer}.weight_ih_l{l}`... in PyTorch's, which is fusegraph's too). Images are `[h, w, c]`,
//! sequences `[time, channels]`; a Conv1D is the convolution of an image of height 1.

use crate::tensor::Layout;
use fusegraph::kernels::gemm::{pool_threads, products_workspace_len};
use fusegraph::layers::attention::attention_products;
use fusegraph::layers::{
    attention_backward, attention_forward, conv_backward, conv_forward, conv_gemm_len,
    conv_scratch_len, dense_backward, dense_forward, dense_gemm_len, embedding_backward,
    embedding_forward, layer_norm_backward, layer_norm_forward, mean_over_time_backward,
    mean_over_time_forward, positional_backward, positional_forward, rnn_backward, rnn_forward,
    rnn_gemm_len, rnn_scratch_len, AttentionDims, Backward, CellKind, ConvDims, Ctx, DenseDims,
    Elu, EmbeddingDims, Forward, Gelu, Identity, Lengths, PositionalDims, Relu, RnnDims, Sigmoid,
    Softmax, Swish, Tanh,
};
use serde_json::Value;
use std::ops::Range;

mod tokens;

/// An activation of a Dense or Conv2D layer, by its Keras name.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Act {
    /// `linear` (or none).
    Linear,
    /// `relu`.
    Relu,
    /// `tanh`.
    Tanh,
    /// `sigmoid`.
    Sigmoid,
    /// `elu` (alpha 1).
    Elu,
    /// `gelu`, exact (Keras `approximate=False`, PyTorch `approximate='none'`).
    Gelu,
    /// `swish` or `silu`.
    Swish,
    /// `softmax` over the features of a sample (the channels of a position, for Conv2D).
    Softmax,
}

/// Runs `$body` with the type alias `$A` set to the runtime's activation type for `$act`.
macro_rules! with_act {
    ($act:expr, |$A:ident| $body:expr) => {
        match $act {
            Act::Linear => {
                type $A = Identity;
                $body
            }
            Act::Relu => {
                type $A = Relu;
                $body
            }
            Act::Tanh => {
                type $A = Tanh;
                $body
            }
            Act::Sigmoid => {
                type $A = Sigmoid;
                $body
            }
            Act::Elu => {
                type $A = Elu;
                $body
            }
            Act::Gelu => {
                type $A = Gelu;
                $body
            }
            Act::Swish => {
                type $A = Swish;
                $body
            }
            Act::Softmax => {
                type $A = Softmax;
                $body
            }
        }
    };
}

impl Act {
    /// The activation named by a layer's `activation` (`null` is linear).
    fn parse(v: Option<&Value>) -> Result<Act, String> {
        let name = match v {
            None | Some(Value::Null) => return Ok(Act::Linear),
            Some(Value::String(s)) => s.as_str(),
            Some(other) => return Err(format!("activation {other} is not a name")),
        };
        Ok(match name {
            "linear" | "identity" | "none" => Act::Linear,
            "relu" => Act::Relu,
            "tanh" => Act::Tanh,
            "sigmoid" => Act::Sigmoid,
            "elu" => Act::Elu,
            "gelu" => Act::Gelu,
            "swish" | "silu" => Act::Swish,
            "softmax" => Act::Softmax,
            other => return Err(format!("unsupported activation `{other}`")),
        })
    }
}

/// What a layer computes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    /// A fully connected layer applied to each of `positions` vectors (1 for a vector input,
    /// the positions of a sequence): the Dense layer over `batch * positions` rows.
    Dense(DenseDims, Act, usize),
    /// A convolution over NHWC images (of height 1 for a Conv1D over a sequence).
    Conv(ConvDims, Act),
    /// The mean over the positions of a `[time, channels]` sequence.
    MeanOverTime {
        /// Positions.
        time: usize,
        /// Channels.
        channels: usize,
    },
    /// Flattening an image into a vector: a copy (NHWC is already `(h, w, c)` order).
    Flatten,
    /// A stack of GRU or LSTM layers, and whether it is packed on the batch's lengths
    /// (PyTorch's `pack_padded_sequence`; else it runs over every step).
    Rnn(RnnDims, bool),
    /// Token ids to rows of a table.
    Embedding(EmbeddingDims),
    /// A learned row added at every position.
    Positional(PositionalDims),
    /// Layer normalization over the last axis (`features` values a row).
    LayerNorm {
        /// Values normalized together.
        features: usize,
        /// Rows of them per sample.
        rows: usize,
    },
    /// Causal multi-head self-attention over a `[seq, dim]` sequence.
    Attention(AttentionDims),
}

/// One layer of the stack, with its sizes per sample.
#[derive(Debug)]
pub(crate) struct Node {
    /// What it computes.
    pub op: Op,
    /// Output values per sample.
    pub outputs: usize,
    /// Values per sample saved by forward for backward.
    pub saved: usize,
    /// Its parameters in the model's flat buffer (empty for Flatten).
    pub params: Range<usize>,
    /// The node whose input is added to this node's output (`h = h + f(h)`), if any.
    pub residual: Option<usize>,
}

impl Node {
    fn new(op: Op, outputs: usize, params: Range<usize>) -> Node {
        let saved = match op {
            Op::Dense(dims, act, positions) => positions * with_act!(act, |A| dims.saved::<A>()),
            Op::Conv(dims, act) => with_act!(act, |A| dims.saved::<A>()),
            Op::MeanOverTime { .. } | Op::Flatten => 0,
            Op::Rnn(dims, _) => dims.saved(),
            Op::Embedding(_) | Op::Positional(_) => 0,
            Op::LayerNorm { rows, .. } => 2 * rows,
            Op::Attention(dims) => dims.saved(),
        };
        Node {
            op,
            outputs,
            saved,
            params,
            residual: None,
        }
    }

    /// Scratch one call needs for `batch` samples.
    pub fn scratch_len(&self, batch: usize) -> usize {
        match self.op {
            Op::Conv(dims, _) => conv_scratch_len(dims, batch),
            Op::Rnn(dims, _) => rnn_scratch_len(dims, batch),
            Op::Attention(dims) => dims.scratch() * batch,
            Op::Dense(..)
            | Op::MeanOverTime { .. }
            | Op::Flatten
            | Op::Embedding(_)
            | Op::Positional(_)
            | Op::LayerNorm { .. } => 0,
        }
    }

    /// GEMM workspace one call needs for `batch` samples.
    pub fn gemm_len(&self, batch: usize) -> usize {
        match self.op {
            Op::Dense(dims, _, positions) => dense_gemm_len(dims, batch * positions),
            Op::Conv(dims, _) => conv_gemm_len(dims, batch),
            Op::MeanOverTime { .. }
            | Op::Flatten
            | Op::Embedding(_)
            | Op::Positional(_)
            | Op::LayerNorm { .. } => 0,
            Op::Rnn(dims, _) => rnn_gemm_len(dims, batch),
            Op::Attention(dims) => {
                products_workspace_len(&attention_products(dims), batch, pool_threads())
            }
        }
    }

    /// The layer's forward pass, as its `Layer` implementation runs it.
    pub fn forward(&self, ctx: &mut Ctx<'_>, io: Forward<'_>) {
        match self.op {
            Op::Conv(dims, act) => with_act!(act, |A| conv_forward::<A>(ctx, dims, io)),
            Op::MeanOverTime { time, channels } => {
                mean_over_time_forward(time, channels, ctx.lengths, io)
            }
            Op::Flatten => io.y.copy_from_slice(io.x),
            Op::Dense(dims, act, positions) => {
                let io = Forward {
                    batch: io.batch * positions,
                    ..io
                };
                with_act!(act, |A| dense_forward::<A>(ctx, dims, io))
            }
            Op::Rnn(dims, packed) => rnn_forward(&mut packing(ctx, packed), dims, io),
            Op::Embedding(_) => unreachable!("Net::parse sends an Embedding token ids alone"),
            Op::Positional(dims) => positional_forward(dims, io),
            Op::LayerNorm { features, .. } => layer_norm_forward(features, io),
            Op::Attention(dims) => attention_forward(ctx, dims, io),
        }
    }

    /// The layer's forward pass over a model's token ids, as its `TokenLayer` implementation
    /// runs it: only an `Embedding` reads ids, which [`Net::parse`] checks.
    pub fn forward_ids(&self, io: Forward<'_, u32>) {
        let Op::Embedding(dims) = self.op else {
            unreachable!("Net::parse sends token ids to an Embedding first")
        };
        embedding_forward(dims, io);
    }

    /// The layer's backward pass over a model's token ids, as its `TokenLayer` implementation
    /// runs it.
    pub fn backward_ids(&self, io: Backward<'_, u32>) {
        let Op::Embedding(dims) = self.op else {
            unreachable!("Net::parse sends token ids to an Embedding first")
        };
        embedding_backward(dims, io);
    }

    /// The layer's backward pass, as its `Layer` implementation runs it.
    pub fn backward(&self, ctx: &mut Ctx<'_>, io: Backward<'_>) {
        match self.op {
            Op::Conv(dims, act) => with_act!(act, |A| conv_backward::<A>(ctx, dims, io)),
            Op::MeanOverTime { time, channels } => {
                mean_over_time_backward(time, channels, ctx.lengths, io)
            }
            Op::Flatten => io.dx.give(io.dy),
            Op::Dense(dims, act, positions) => {
                let io = Backward {
                    batch: io.batch * positions,
                    ..io
                };
                with_act!(act, |A| dense_backward::<A>(ctx, dims, io))
            }
            Op::Rnn(dims, packed) => rnn_backward(&mut packing(ctx, packed), dims, io),
            Op::Embedding(_) => unreachable!("Net::parse sends an Embedding token ids alone"),
            Op::Positional(dims) => positional_backward(dims, io),
            Op::LayerNorm { features, .. } => layer_norm_backward(features, io),
            Op::Attention(dims) => attention_backward(ctx, dims, io),
        }
    }
}

/// A sequential model built from a case's `model`.
#[derive(Debug)]
pub(crate) struct Net {
    /// The layers, in order.
    pub nodes: Vec<Node>,
    /// Shape of one input sample (`model.input_shape`).
    pub input_shape: Vec<usize>,
    /// Shape of one output sample.
    pub output_shape: Vec<usize>,
    /// The parameter tensors, in layer order.
    pub layout: Layout,
    /// Whether the inputs are token ids (`input_dtype` `int (token ids)`), carried as `f32`.
    pub tokens: bool,
    /// The names of the layers, in order.
    names: Vec<String>,
    /// The output shape of each layer, in order.
    shapes: Vec<Vec<usize>>,
}

impl Net {
    /// Reads `model.input_dtype`, `model.input_shape` and `model.layers`.
    pub fn parse(model: &Value) -> Result<Net, String> {
        let tokens = match model.get("input_dtype").and_then(Value::as_str) {
            None | Some("float32") => false,
            Some("int (token ids)") => true,
            Some(other) => return Err(format!("unsupported input_dtype `{other}`")),
        };
        let input_shape = sizes(&model["input_shape"], "model.input_shape")?;
        let specs = model["layers"]
            .as_array()
            .filter(|l| !l.is_empty())
            .ok_or("model.layers is missing or empty")?;
        let mut net = Net {
            nodes: Vec::with_capacity(specs.len()),
            input_shape: input_shape.clone(),
            output_shape: input_shape,
            layout: Layout::default(),
            tokens,
            names: Vec::new(),
            shapes: Vec::new(),
        };
        for (i, spec) in specs.iter().enumerate() {
            net.push(spec, i)?;
        }
        Ok(net)
    }

    /// Input values per sample.
    pub fn inputs(&self) -> usize {
        self.input_shape.iter().product()
    }

    /// Output values per sample.
    pub fn outputs(&self) -> usize {
        self.output_shape.iter().product()
    }

    /// Appends layer `spec` (number `i`) to the stack.
    fn push(&mut self, spec: &Value, i: usize) -> Result<(), String> {
        let kind = spec["type"].as_str().unwrap_or_default();
        let name = match spec["name"].as_str() {
            Some(n) => n.to_owned(),
            None if kind == "Flatten" => format!("layers[{i}]"),
            None => return Err(format!("model.layers[{i}] ({kind}) has no name")),
        };
        let layer = Spec {
            spec,
            what: format!("{kind} `{name}`"),
        };
        let shape = self.output_shape.clone();
        if let Some(v) = spec.get("input_shape").filter(|v| !v.is_null()) {
            layer.expect_shape(v, &shape, "input_shape")?;
        }
        let start = self.layout.len();
        let (op, out_shape) = match kind {
            "Dense" => {
                layer.check_keys(&[
                    "in",
                    "units",
                    "activation",
                    "use_bias",
                    "applied",
                    "approximate",
                ])?;
                layer.exact_gelu()?;
                let (positions, inputs) = match shape[..] {
                    [inputs] => (None, inputs),
                    [positions, inputs] => (Some(positions), inputs),
                    _ => {
                        return Err(format!(
                            "{}: fusegraph's Dense takes vectors or sequences of them, not a \
                             {shape:?} input (insert a Flatten)",
                            layer.what
                        ))
                    }
                };
                layer.expect_size("in", inputs)?;
                let outputs = layer.positive("units")?;
                let bias = layer.flag("use_bias", true)?;
                self.push_kernel(&name, vec![inputs, outputs], bias);
                let dims = DenseDims {
                    inputs,
                    outputs,
                    bias,
                };
                let out = match positions {
                    None => vec![outputs],
                    Some(n) => vec![n, outputs],
                };
                (Op::Dense(dims, layer.act()?, positions.unwrap_or(1)), out)
            }
            "Conv2D" => {
                layer.check_keys(&[
                    "in_channels",
                    "filters",
                    "kernel_size",
                    "strides",
                    "padding",
                    "activation",
                    "use_bias",
                    "dilation_rate",
                    "groups",
                    "data_format",
                ])?;
                let [h, w, c] = shape[..] else {
                    return Err(format!(
                        "{}: Conv2D takes NHWC images, not a {shape:?} input",
                        layer.what
                    ));
                };
                layer.expect_size("in_channels", c)?;
                layer.expect_pair("dilation_rate", 1)?;
                layer.expect_size("groups", 1)?;
                if let Some(f) = spec["data_format"].as_str() {
                    if f != "channels_last" {
                        return Err(format!("{}: unsupported data_format `{f}`", layer.what));
                    }
                }
                let f = layer.positive("filters")?;
                let (kh, kw) = layer.pair("kernel_size")?;
                let (sh, sw) = match spec.get("strides").filter(|v| !v.is_null()) {
                    None => (1, 1),
                    Some(_) => layer.pair("strides")?,
                };
                if sh != sw {
                    return Err(format!(
                        "{}: strides ({sh}, {sw}) differ (fusegraph's Conv2d has one stride)",
                        layer.what
                    ));
                }
                let same = layer.same_padding()?;
                if kh == 0 || kw == 0 || sh == 0 {
                    return Err(format!("{}: a kernel or stride of 0", layer.what));
                }
                if !same && (kh > h || kw > w) {
                    return Err(format!(
                        "{}: a {kh}x{kw} kernel on a {h}x{w} input with padding `valid`",
                        layer.what
                    ));
                }
                let bias = layer.flag("use_bias", true)?;
                let dims = ConvDims {
                    h,
                    w,
                    c,
                    f,
                    kh,
                    kw,
                    stride: sh,
                    same,
                    bias,
                };
                self.push_kernel(&name, vec![kh, kw, c, f], bias);
                let out = vec![dims.out_h(), dims.out_w(), f];
                (Op::Conv(dims, layer.act()?), out)
            }
            "Conv1D" => self.conv1d(&layer, &name, &shape)?,
            "GlobalAveragePooling1D" | "MeanOverTime" => layer.mean_over_time(&shape)?,
            "Flatten" => {
                layer.check_keys(&["data_format", "order"])?;
                layer.expect_value("order", &Value::from("(h, w, c)"))?;
                (Op::Flatten, vec![shape.iter().product()])
            }
            "GRU" | "LSTM" => self.recurrent(&layer, &name, kind, &shape)?,
            "Embedding" => self.embedding(&layer, &name, &shape)?,
            "EmbeddingBag" => self.embedding_bag(&layer, &name, &shape)?,
            "PositionalEmbedding" => self.positional(&layer, &name, &shape)?,
            "LayerNorm" => self.layer_norm(&layer, &name, &shape)?,
            "CausalSelfAttention" => self.attention(&layer, &name, &shape)?,
            other => return Err(format!("unsupported layer type `{other}` (`{name}`)")),
        };
        let name_of_bag = name.clone();
        if let Some(v) = spec.get("output_shape").filter(|v| !v.is_null()) {
            if kind != "EmbeddingBag" {
                layer.expect_shape(v, &out_shape, "output_shape")?;
            }
        }
        if self.tokens && self.nodes.is_empty() && !matches!(op, Op::Embedding(_)) {
            return Err(format!(
                "{}: token ids go to an Embedding first",
                layer.what
            ));
        }
        let mut node = Node::new(op, out_shape.iter().product(), start..self.layout.len());
        node.residual = self.residual(&layer, &shape, &out_shape)?;
        self.nodes.push(node);
        self.names.push(name);
        self.shapes.push(out_shape.clone());
        self.output_shape = out_shape;
        if kind == "EmbeddingBag" {
            self.push_bag_mean(&layer, &name_of_bag)?;
        }
        Ok(())
    }

    /// Appends the tensors `{prefix}.kernel` of `shape` and, with `bias`, `{prefix}.bias` of
    /// the kernel's last size (its outputs).
    fn push_kernel(&mut self, prefix: &str, shape: Vec<usize>, bias: bool) {
        let outputs = shape.last().copied().unwrap_or(0);
        self.layout.push(format!("{prefix}.kernel"), shape);
        if bias {
            self.layout.push(format!("{prefix}.bias"), vec![outputs]);
        }
    }

    /// A Conv1D over `[time, channels]` sequences (`shape`): a convolution of height 1, its
    /// kernel `{name}.kernel` `[k, in, out]`.
    fn conv1d(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&[
            "in_channels",
            "filters",
            "kernel_size",
            "strides",
            "padding",
            "dilation",
            "activation",
            "use_bias",
        ])?;
        let [t, c] = shape[..] else {
            return Err(format!(
                "{}: Conv1D takes [time, channels] sequences, not a {shape:?} input",
                layer.what
            ));
        };
        layer.expect_size("in_channels", c)?;
        layer.expect_single("dilation", 1)?;
        let f = layer.positive("filters")?;
        let k = layer.single("kernel_size")?;
        let stride = match layer.spec.get("strides").filter(|v| !v.is_null()) {
            None => 1,
            Some(_) => layer.single("strides")?,
        };
        let same = layer.same_padding()?;
        if !same && k > t {
            return Err(format!(
                "{}: a kernel of {k} on {t} positions with padding `valid`",
                layer.what
            ));
        }
        let bias = layer.flag("use_bias", true)?;
        let dims = ConvDims {
            h: 1,
            w: t,
            c,
            f,
            kh: 1,
            kw: k,
            stride,
            same,
            bias,
        };
        // Keras' `same` pads less before than PyTorch's `padding=(k-1)//2` when the
        // stride does not divide t - 1; the cases state PyTorch's.
        if same && dims.pad_left() != (k - 1) / 2 {
            return Err(format!(
                "{}: padding `same` with stride {stride} on {t} positions: PyTorch pads \
                 {} zeros before, fusegraph's Same (Keras') {}",
                layer.what,
                (k - 1) / 2,
                dims.pad_left()
            ));
        }
        self.push_kernel(name, vec![k, c, f], bias);
        Ok((Op::Conv(dims, layer.act()?), vec![dims.out_w(), f]))
    }
}

impl Net {
    /// A `GRU` or `LSTM` descriptor (PyTorch's options: batch first, zero initial states, no
    /// dropout, one direction or both, packed on the batch's lengths or not) over a
    /// `[seq, features]` input; appends its tensors, `{name}.weight_ih_l{l}`,
    /// `{name}.weight_hh_l{l}`, `{name}.bias_ih_l{l}` and `{name}.bias_hh_l{l}` per layer and
    /// direction (the reverse one's suffixed `_reverse`), in PyTorch's layout.
    fn recurrent(
        &mut self,
        layer: &Spec<'_>,
        name: &str,
        kind: &str,
        shape: &[usize],
    ) -> Result<(Op, Vec<usize>), String> {
        layer.check_keys(&[
            "input_size",
            "hidden_size",
            "num_layers",
            "bias",
            "batch_first",
            "bidirectional",
            "dropout",
            "initial_state",
            "gate_order",
            "returns",
            "note",
            "packed",
        ])?;
        let (cell, gates) = match kind {
            "GRU" => (CellKind::Gru, ["r", "z", "n"].as_slice()),
            _ => (CellKind::Lstm, ["i", "f", "g", "o"].as_slice()),
        };
        let &[steps, inputs] = shape else {
            return Err(format!(
                "{}: a recurrent layer takes [seq, features], not a {shape:?} input",
                layer.what
            ));
        };
        layer.expect_size("input_size", inputs)?;
        layer.expect_value("bias", &Value::Bool(true))?;
        layer.expect_value("batch_first", &Value::Bool(true))?;
        layer.expect_value("initial_state", &Value::from("zeros"))?;
        layer.expect_value("gate_order", &Value::from(gates))?;
        if layer.spec["dropout"].as_f64().is_some_and(|d| d != 0.0) {
            return Err(format!(
                "{}: unsupported dropout between layers",
                layer.what
            ));
        }
        let sequence = match layer.spec["returns"].as_str() {
            Some("last_step") => false,
            Some("sequence") => true,
            _ => {
                return Err(format!(
                    "{}: `returns` is neither `last_step` nor `sequence`",
                    layer.what
                ))
            }
        };
        let dims = RnnDims {
            cell,
            steps,
            inputs,
            hidden: layer.positive("hidden_size")?,
            layers: layer.positive("num_layers")?,
            sequence,
            bidirectional: layer.flag("bidirectional", false)?,
        };
        let g = dims.gate_rows();
        for l in 0..dims.layers {
            for suffix in ["", "_reverse"].iter().take(dims.directions()) {
                let (n, h) = (dims.layer_inputs(l), dims.hidden);
                self.layout
                    .push(format!("{name}.weight_ih_l{l}{suffix}"), vec![g, n]);
                self.layout
                    .push(format!("{name}.weight_hh_l{l}{suffix}"), vec![g, h]);
                self.layout
                    .push(format!("{name}.bias_ih_l{l}{suffix}"), vec![g]);
                self.layout
                    .push(format!("{name}.bias_hh_l{l}{suffix}"), vec![g]);
            }
        }
        let out = if sequence {
            vec![steps, dims.layer_outputs()]
        } else {
            vec![dims.layer_outputs()]
        };
        Ok((Op::Rnn(dims, layer.flag("packed", false)?), out))
    }
}

/// `ctx` for a recurrent layer: with the batch's lengths when it is `packed`, else with every
/// step real (an unpacked PyTorch RNN runs over the padding too).
fn packing<'a>(ctx: &'a mut Ctx<'_>, packed: bool) -> Ctx<'a> {
    Ctx {
        gemm: ctx.gemm,
        scratch: ctx.scratch,
        rng: ctx.rng,
        first_sample: ctx.first_sample,
        mode: ctx.mode,
        lengths: if packed { ctx.lengths } else { Lengths::FULL },
    }
}

/// One entry of `model.layers`, named in messages by `what`.
struct Spec<'a> {
    spec: &'a Value,
    what: String,
}

impl Spec<'_> {
    /// Fails on a key that is neither in `own`, nor common to every layer (`name`, `type`,
    /// `description`, `input_shape`, `output_shape`, initializers: the initial weights are
    /// given), nor `null`.
    fn check_keys(&self, own: &[&str]) -> Result<(), String> {
        const COMMON: &[&str] = &[
            "name",
            "type",
            "description",
            "input_shape",
            "output_shape",
            "residual",
            "note",
        ];
        let Some(keys) = self.spec.as_object() else {
            return Err(format!("{}: not an object", self.what));
        };
        for (k, v) in keys {
            let known = own.contains(&k.as_str())
                || COMMON.contains(&k.as_str())
                || k.ends_with("_initializer");
            if !known && !v.is_null() {
                return Err(format!("{}: unsupported option `{k}` = {v}", self.what));
            }
        }
        Ok(())
    }

    /// A GlobalAveragePooling1D or MeanOverTime (the mean of a bag of embeddings, whose `note`
    /// says so in words) over `[time, channels]` sequences (`shape`).
    fn mean_over_time(&self, shape: &[usize]) -> Result<(Op, Vec<usize>), String> {
        self.check_keys(&["axis", "note"])?;
        self.expect_size("axis", 1)?;
        let [time, channels] = shape[..] else {
            return Err(format!(
                "{}: averages [time, channels] sequences, not a {shape:?} input",
                self.what
            ));
        };
        Ok((Op::MeanOverTime { time, channels }, vec![channels]))
    }

    /// The activation.
    fn act(&self) -> Result<Act, String> {
        Act::parse(self.spec.get("activation")).map_err(|e| format!("{}: {e}", self.what))
    }

    /// A size of at least 1.
    fn positive(&self, key: &str) -> Result<usize, String> {
        match self.spec[key]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
        {
            Some(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "{}: `{key}` = {} is not a positive size",
                self.what, self.spec[key]
            )),
        }
    }

    /// A positive size, or a list of one (`kernel_size`, `strides` of a Conv1D).
    fn single(&self, key: &str) -> Result<usize, String> {
        let v = &self.spec[key];
        let size = match v {
            Value::Array(a) if a.len() == 1 => a[0].as_u64(),
            other => other.as_u64(),
        };
        match size.and_then(|n| usize::try_from(n).ok()) {
            Some(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "{}: `{key}` = {v} is not a positive size",
                self.what
            )),
        }
    }

    /// Checks `key`, when present, to be `expected` or a list of it.
    fn expect_single(&self, key: &str, expected: usize) -> Result<(), String> {
        match self.spec.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(_) if self.single(key)? == expected => Ok(()),
            Some(v) => Err(format!("{}: unsupported `{key}` = {v}", self.what)),
        }
    }

    /// `padding`: `true` for `same`, `false` for `valid` or none.
    fn same_padding(&self) -> Result<bool, String> {
        match self.spec["padding"].as_str().map(str::to_ascii_lowercase) {
            None => Ok(false),
            Some(p) if p == "valid" => Ok(false),
            Some(p) if p == "same" => Ok(true),
            Some(p) => Err(format!("{}: unsupported padding `{p}`", self.what)),
        }
    }

    /// A size or a pair of sizes (`kernel_size`, `strides`), as `(height, width)`.
    fn pair(&self, key: &str) -> Result<(usize, usize), String> {
        let v = &self.spec[key];
        let size = |v: &Value| v.as_u64().and_then(|n| usize::try_from(n).ok());
        let pair = match v {
            Value::Array(a) if a.len() == 2 => size(&a[0]).zip(size(&a[1])),
            other => size(other).map(|n| (n, n)),
        };
        pair.ok_or_else(|| format!("{}: `{key}` = {v} is not a size or a pair", self.what))
    }

    /// A boolean, `default` when absent or `null`.
    fn flag(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.spec.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(format!("{}: `{key}` = {v} is not a boolean", self.what)),
        }
    }

    /// Checks `key`, when present, against the size the stack gives.
    fn expect_size(&self, key: &str, expected: usize) -> Result<(), String> {
        match self.spec.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(v) if v.as_u64() == Some(expected as u64) => Ok(()),
            Some(v) => Err(format!(
                "{}: `{key}` = {v}, but the stack gives {expected}",
                self.what
            )),
        }
    }

    /// Checks `key`, when present and not `null`, to be `expected`.
    fn expect_value(&self, key: &str, expected: &Value) -> Result<(), String> {
        match self.spec.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(v) if v == expected => Ok(()),
            Some(v) => Err(format!("{}: unsupported `{key}` = {v}", self.what)),
        }
    }

    /// Checks `key`, when present, to be `expected` or a pair of it.
    fn expect_pair(&self, key: &str, expected: usize) -> Result<(), String> {
        match self.spec.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(_) if self.pair(key)? == (expected, expected) => Ok(()),
            Some(v) => Err(format!("{}: unsupported `{key}` = {v}", self.what)),
        }
    }

    /// Checks a shape the case states against the one the stack gives.
    fn expect_shape(&self, v: &Value, shape: &[usize], key: &str) -> Result<(), String> {
        let stated = sizes(v, &format!("{}: `{key}`", self.what))?;
        if stated == shape {
            Ok(())
        } else {
            Err(format!(
                "{}: `{key}` is {stated:?}, but the stack gives {shape:?}",
                self.what
            ))
        }
    }
}

/// A list of sizes.
fn sizes(v: &Value, what: &str) -> Result<Vec<usize>, String> {
    v.as_array()
        .and_then(|a| {
            a.iter()
                .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                .collect::<Option<Vec<usize>>>()
        })
        .ok_or_else(|| format!("{what} = {v} is not a list of sizes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conv_flatten_dense_shapes_and_tensors() {
        let model = json!({"input_shape": [6, 5, 2], "layers": [
            {"name": "c", "type": "Conv2D", "in_channels": 2, "filters": 3, "kernel_size": [3, 2],
             "strides": 2, "padding": "same", "activation": "relu", "use_bias": false,
             "kernel_initializer": "glorot_uniform", "output_shape": [3, 3, 3]},
            {"name": "flatten", "type": "Flatten", "output_shape": [27]},
            {"name": "d", "type": "Dense", "in": 27, "units": 4, "activation": "tanh"}
        ]});
        let net = Net::parse(&model).unwrap();
        assert_eq!(net.layout.names, ["c.kernel", "d.kernel", "d.bias"]);
        assert_eq!(net.layout.shapes[0], [3, 2, 2, 3]);
        assert_eq!((net.inputs(), net.outputs()), (60, 4));
        let sizes: Vec<(usize, usize)> = net
            .nodes
            .iter()
            .map(|n| (n.outputs, n.params.len()))
            .collect();
        assert_eq!(sizes, [(27, 36), (27, 0), (4, 112)]);
        assert!(matches!(net.nodes[0].op, Op::Conv(d, Act::Relu) if d.same && !d.bias));
    }

    #[test]
    fn conv1d_and_pooling_over_time_shapes_and_tensors() {
        let model = json!({"input_shape": [10, 3], "layers": [
            {"name": "conv1", "type": "Conv1D", "in_channels": 3, "filters": 5, "kernel_size": 3,
             "strides": 1, "padding": "same", "dilation": 1, "activation": "relu",
             "use_bias": true, "output_shape": [10, 5]},
            {"name": "conv2", "type": "Conv1D", "in_channels": 5, "filters": 4,
             "kernel_size": [5], "strides": [2], "padding": "valid", "activation": "tanh",
             "use_bias": false, "output_shape": [3, 4]},
            {"name": "gap", "type": "GlobalAveragePooling1D", "axis": 1, "output_shape": [4]},
            {"name": "fc", "type": "Dense", "in": 4, "units": 2}
        ]});
        let net = Net::parse(&model).unwrap();
        assert_eq!(
            net.layout.names,
            [
                "conv1.kernel",
                "conv1.bias",
                "conv2.kernel",
                "fc.kernel",
                "fc.bias"
            ]
        );
        assert_eq!(net.layout.shapes[0], [3, 3, 5]);
        assert_eq!(net.layout.shapes[2], [5, 5, 4]);
        assert_eq!((net.inputs(), net.outputs()), (30, 2));
        let sizes: Vec<(usize, usize)> = net
            .nodes
            .iter()
            .map(|n| (n.outputs, n.params.len()))
            .collect();
        assert_eq!(sizes, [(50, 50), (12, 100), (4, 0), (2, 10)]);
        assert!(matches!(
            net.nodes[1].op,
            Op::Conv(d, Act::Tanh) if (d.h, d.kh, d.stride, d.same, d.bias) == (1, 1, 2, false, false)
        ));
        assert!(matches!(
            net.nodes[2].op,
            Op::MeanOverTime {
                time: 3,
                channels: 4
            }
        ));
        let bag = json!({"input_shape": [7, 6], "layers": [
            {"name": "pool", "type": "MeanOverTime", "axis": 1, "note": "plain mean"},
            {"name": "fc", "type": "Dense", "in": 6, "units": 3}]});
        let net = Net::parse(&bag).unwrap();
        assert_eq!((net.inputs(), net.nodes[0].outputs), (42, 6));
    }

    #[test]
    fn what_a_sequence_model_cannot_run_is_named() {
        let err = |layers: Value| {
            Net::parse(&json!({"input_shape": [10, 2], "layers": layers})).unwrap_err()
        };
        let conv = |extra: Value| {
            let mut spec = json!({"name": "c", "type": "Conv1D", "filters": 2, "kernel_size": 5});
            spec.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            err(json!([spec]))
        };
        let e = conv(json!({"dilation": 2}));
        assert!(e.contains("`dilation`"), "{e}");
        let e = conv(json!({"kernel_size": 11}));
        assert!(e.contains("kernel of 11 on 10 positions"), "{e}");
        let e = conv(json!({"padding": "same", "strides": 2}));
        assert!(
            e.contains("PyTorch pads 2 zeros before") && e.contains("Keras') 1"),
            "{e}"
        );
        let e = conv(json!({"padding": "causal"}));
        assert!(e.contains("`causal`"), "{e}");
        let e = err(json!([{"name": "e", "type": "Embedding", "vocab": 12, "dim": 6}]));
        assert!(e.contains("token ids"), "{e}");
        let e = Net::parse(
            &json!({"input_shape": [7], "input_dtype": "int (token ids)",
                                   "layers": [{"name": "gap", "type": "Flatten"}]}),
        )
        .unwrap_err();
        assert!(e.contains("go to an Embedding first"), "{e}");
        let e = Net::parse(&json!({"input_shape": [7], "input_dtype": "int64", "layers": []}))
            .unwrap_err();
        assert!(e.contains("`int64`"), "{e}");
        let e = Net::parse(&json!({"input_shape": [4, 4, 1], "layers": [
            {"name": "gap", "type": "GlobalAveragePooling1D", "axis": 1}]}))
        .unwrap_err();
        assert!(e.contains("[4, 4, 1]"), "{e}");
        let e = Net::parse(&json!({"input_shape": [7, 6], "layers": [
            {"name": "pool", "type": "MeanOverTime", "axis": 2, "note": "mean"}]}))
        .unwrap_err();
        assert!(e.contains("`axis` = 2"), "{e}");
    }

    #[test]
    fn what_cannot_run_is_named() {
        let err = |layers: Value| {
            Net::parse(&json!({"input_shape": [4, 4, 1], "layers": layers})).unwrap_err()
        };
        let e = err(json!([{"name": "p", "type": "MaxPooling2D"}]));
        assert!(e.contains("`MaxPooling2D`"), "{e}");
        let e = err(json!([{"name": "d", "type": "Dense", "units": 2}]));
        assert!(e.contains("Flatten"), "{e}");
        let e = err(
            json!([{"name": "c", "type": "Conv2D", "filters": 1, "kernel_size": 3,
                            "activation": "hard_sigmoid"}]),
        );
        assert!(e.contains("`hard_sigmoid`"), "{e}");
        let e = err(
            json!([{"name": "c", "type": "Conv2D", "filters": 1, "kernel_size": 3,
                            "dilation_rate": 2}]),
        );
        assert!(e.contains("`dilation_rate`"), "{e}");
        let e = err(json!([{"name": "c", "type": "Conv2D", "filters": 1, "kernel_size": 5}]));
        assert!(e.contains("5x5 kernel"), "{e}");
        let e = err(
            json!([{"name": "c", "type": "Conv2D", "filters": 1, "kernel_size": 3,
                            "trainable": false}]),
        );
        assert!(e.contains("`trainable`"), "{e}");
        let e = err(json!([{"type": "Flatten", "output_shape": [15]}]));
        assert!(e.contains("[16]"), "{e}");
    }

    #[test]
    fn recurrent_layers_name_their_tensors_as_pytorch_does() {
        let model = json!({"input_shape": [5, 3], "layers": [
            {"name": "lstm", "type": "LSTM", "input_size": 3, "hidden_size": 4, "num_layers": 2,
             "bias": true, "batch_first": true, "bidirectional": false, "dropout": 0.0,
             "gate_order": ["i", "f", "g", "o"], "returns": "sequence", "output_shape": [5, 4]},
            {"name": "fc", "type": "Dense", "in": 4, "units": 2, "applied": "every position"}
        ]});
        let net = Net::parse(&model).unwrap();
        assert_eq!(
            net.layout.names,
            [
                "lstm.weight_ih_l0",
                "lstm.weight_hh_l0",
                "lstm.bias_ih_l0",
                "lstm.bias_hh_l0",
                "lstm.weight_ih_l1",
                "lstm.weight_hh_l1",
                "lstm.bias_ih_l1",
                "lstm.bias_hh_l1",
                "fc.kernel",
                "fc.bias"
            ]
        );
        assert_eq!(net.layout.shapes[0], [16, 3]);
        assert_eq!(net.layout.shapes[4], [16, 4]);
        assert_eq!(net.output_shape, [5, 2]);
        assert!(
            matches!(net.nodes[0].op, Op::Rnn(d, false) if d.cell == CellKind::Lstm && d.sequence)
        );
        assert!(matches!(net.nodes[1].op, Op::Dense(_, _, 5)));
        // Per position: no saved values for a linear Dense; the LSTM's per step and layer.
        assert_eq!((net.nodes[0].saved, net.nodes[1].saved), (2 * 5 * 28, 0));
        let err = |options: Value| {
            let mut spec = json!({"name": "g", "type": "GRU", "hidden_size": 2,
                                  "num_layers": 1, "returns": "last_step"});
            spec.as_object_mut()
                .unwrap()
                .extend(options.as_object().unwrap().clone());
            Net::parse(&json!({"input_shape": [4, 2], "layers": [spec]})).unwrap_err()
        };
        assert!(err(json!({"bidirectional": "yes"})).contains("`bidirectional`"));
        // Both directions: the reverse tensors after each layer's forward ones, `[T, 2H]` out.
        let bi = json!({"input_shape": [4, 2], "layers": [
            {"name": "g", "type": "GRU", "hidden_size": 3, "num_layers": 2,
             "bidirectional": true, "packed": true, "returns": "sequence"}]});
        let net = Net::parse(&bi).unwrap();
        assert_eq!(net.layout.names[4], "g.weight_ih_l0_reverse");
        assert_eq!(net.layout.names[8], "g.weight_ih_l1");
        assert_eq!(net.layout.shapes[8], [9, 6]);
        assert_eq!(net.output_shape, [4, 6]);
        assert!(matches!(net.nodes[0].op, Op::Rnn(d, true) if d.bidirectional));
        assert!(err(json!({"gate_order": ["z", "r", "n"]})).contains("`gate_order`"));
        assert!(err(json!({"dropout": 0.5})).contains("dropout"));
        assert!(err(json!({"returns": "both"})).contains("`returns`"));
        assert!(err(json!({"input_size": 3})).contains("stack gives 2"));
    }
}
