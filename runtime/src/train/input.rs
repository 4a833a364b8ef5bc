//! What a model reads: `f32` features or `u32` token ids.

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u32 {}
}

/// The element type of a model's input, chosen with `#[fusegraph::model(input = u32)]`
/// (`f32`, the default, otherwise): `f32` features, or `u32` token ids for a model whose first
/// layers read ids ([`TokenLayer`](crate::layers::TokenLayer)). The model hands its input to
/// those layers as it is: ids stay `u32` from the step's methods to the table row they name.
#[diagnostic::on_unimplemented(
    message = "a model reads `f32` features or `u32` token ids, not `{Self}`",
    label = "write `input = f32` or `input = u32`"
)]
pub trait InputValue:
    sealed::Sealed + Copy + Default + Send + Sync + PartialEq + core::fmt::Debug + 'static
{
    /// The value as a token id (`None` for a feature).
    fn token(self) -> Option<u32>;
}

impl InputValue for f32 {
    fn token(self) -> Option<u32> {
        None
    }
}

impl InputValue for u32 {
    fn token(self) -> Option<u32> {
        Some(self)
    }
}
