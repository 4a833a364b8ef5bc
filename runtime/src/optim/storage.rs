//! Where an optimizer (and a train step) keeps its state: in buffers it allocates once
//! ([`Allocated`], feature `alloc`) or in slices of an arena the caller owns ([`Arena`]).
//! The state and the code that updates it are the same either way.

use super::rule::{Rule, Shape};
use core::marker::PhantomData;
use core::ops::{DerefMut, Range};

/// Where the tensors of a flat parameter buffer lie.
pub trait Layout {
    /// Number of tensors.
    fn tensor_count(&self) -> usize;
    /// Where tensor `i` (below [`tensor_count`](Self::tensor_count)) lies in the flat buffer.
    fn tensor_range(&self, i: usize) -> Range<usize>;
    /// Values of the flat buffer: the end of the last tensor.
    fn len(&self) -> usize {
        match self.tensor_count() {
            0 => 0,
            k => self.tensor_range(k - 1).end,
        }
    }
    /// `true` without values.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The shape of tensor `i`: a vector of its length unless the layout knows better.
    fn tensor_shape(&self, i: usize) -> Shape {
        Shape::vector(self.tensor_range(i).len())
    }
    /// The branch of a tensor-wise rule that tensor `i` is routed to by name, if any (else
    /// its shape picks one, [`Rule::branch`]).
    fn tensor_route(&self, i: usize) -> Option<usize> {
        let _ = i;
        None
    }
    /// The branch tensor `i` takes under rule `R`.
    fn tensor_branch<R: Rule>(&self, i: usize) -> usize
    where
        Self: Sized,
    {
        self.tensor_route(i)
            .unwrap_or_else(|| R::branch(self.tensor_shape(i)))
    }
}

/// One tensor of a layout that knows shapes: where it ends in the flat buffer, its shape, and the
/// branch a route names for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The exclusive end of the tensor in the flat buffer.
    pub end: usize,
    /// Its shape.
    pub shape: Shape,
    /// The branch a route names, if any.
    pub route: Option<usize>,
}

/// Tensors laid out one after the other, each with its shape and route.
impl Layout for [Placed] {
    fn tensor_count(&self) -> usize {
        <[Placed]>::len(self)
    }
    fn tensor_range(&self, i: usize) -> Range<usize> {
        let start = if i == 0 { 0 } else { self[i - 1].end };
        start..self[i].end
    }
    fn tensor_shape(&self, i: usize) -> Shape {
        self[i].shape
    }
    fn tensor_route(&self, i: usize) -> Option<usize> {
        self[i].route
    }
}

/// Tensors laid out one after the other, given by their ends.
impl Layout for [usize] {
    fn tensor_count(&self) -> usize {
        <[usize]>::len(self)
    }
    fn tensor_range(&self, i: usize) -> Range<usize> {
        let start = if i == 0 { 0 } else { self[i - 1] };
        start..self[i]
    }
}

/// Tensors laid out one after the other, given by their ends.
impl Layout for &[usize] {
    fn tensor_count(&self) -> usize {
        (**self).tensor_count()
    }
    fn tensor_range(&self, i: usize) -> Range<usize> {
        (**self).tensor_range(i)
    }
}

/// The storage of an [`Optimizer`](super::Optimizer) whose type does not name one: buffers
/// it allocates ([`Allocated`]) with `alloc`, an [`Arena`] without.
#[cfg(feature = "alloc")]
pub type DefaultStorage = Allocated;

/// The storage of an [`Optimizer`](super::Optimizer) whose type does not name one: buffers
/// it allocates (`Allocated`) with `alloc`, an [`Arena`] without.
#[cfg(not(feature = "alloc"))]
pub type DefaultStorage = Arena<'static, &'static [usize]>;

/// Other hyper-parameters or weight decay for one tensor (PyTorch parameter groups).
#[derive(Clone, Copy, Debug)]
pub struct Override<R: Rule> {
    /// The tensor's own rule (hyper-parameters), if any.
    pub rule: Option<R>,
    /// The tensor's own weight-decay coefficient, if any.
    pub decay: Option<f32>,
}

impl<R: Rule> Override<R> {
    /// No override.
    pub const NONE: Self = Override {
        rule: None,
        decay: None,
    };
}

/// Where an optimizer and a train step keep their buffers.
pub trait Storage {
    /// A buffer of values.
    type Floats: DerefMut<Target = [f32]>;
    /// The tensors of the parameter buffer.
    type Layout: Layout;
    /// Per-tensor overrides of rule `R` (empty where the storage has none).
    type Overrides<R: Rule>: DerefMut<Target = [Override<R>]>;
}

/// Buffers allocated once, at construction, on the heap, each from a cache line
/// ([`AlignedFloats`](crate::aligned::AlignedFloats)).
#[cfg(feature = "alloc")]
#[derive(Clone, Copy, Debug)]
pub struct Allocated;

#[cfg(feature = "alloc")]
impl Storage for Allocated {
    type Floats = crate::aligned::AlignedFloats;
    type Layout = alloc::boxed::Box<[Placed]>;
    type Overrides<R: Rule> = alloc::boxed::Box<[Override<R>]>;
}

#[cfg(feature = "alloc")]
impl Layout for alloc::boxed::Box<[Placed]> {
    fn tensor_count(&self) -> usize {
        (**self).tensor_count()
    }
    fn tensor_range(&self, i: usize) -> Range<usize> {
        (**self).tensor_range(i)
    }
    fn tensor_shape(&self, i: usize) -> Shape {
        (**self).tensor_shape(i)
    }
    fn tensor_route(&self, i: usize) -> Option<usize> {
        (**self).tensor_route(i)
    }
}

/// Slices of an arena of lifetime `'a` that the caller owns, with tensors laid out by `L`; no
/// per-tensor overrides.
pub struct Arena<'a, L>(PhantomData<(&'a mut [f32], L)>);

impl<'a, L: Layout> Storage for Arena<'a, L> {
    type Floats = &'a mut [f32];
    type Layout = L;
    type Overrides<R: Rule> = NoOverrides<R>;
}

/// The overrides of an [`Arena`]: none.
pub struct NoOverrides<R>(PhantomData<R>);

impl<R> NoOverrides<R> {
    /// No overrides.
    pub const fn new() -> Self {
        NoOverrides(PhantomData)
    }
}

impl<R> Default for NoOverrides<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Rule> core::ops::Deref for NoOverrides<R> {
    type Target = [Override<R>];
    fn deref(&self) -> &[Override<R>] {
        &[]
    }
}

impl<R: Rule> DerefMut for NoOverrides<R> {
    fn deref_mut(&mut self) -> &mut [Override<R>] {
        &mut []
    }
}
