//! Which instruction set the matrix products run on: a [`Kernel`], chosen once per process.
//!
//! `wide` picks its instructions when the crate is compiled, so a default build (`cargo build
//! --release` without `RUSTFLAGS`) runs SSE2 code on x86_64. The GEMM's microkernel is also
//! compiled for AVX2 with FMA and for AVX-512F, and [`Kernel::active`] picks the best one the
//! CPU has, once, the first time a product runs:
//!
//! | kernel | tile | `mul_add` | chosen when |
//! |---|---|---|---|
//! | [`Kernel::Avx512`] | 12x32, or 16x16 | one rounding | the CPU has AVX-512F (feature `std`), or the build enables it |
//! | [`Kernel::Avx2Fma`] | 6x16 | one rounding | the CPU has AVX2 and FMA (feature `std`), or the build enables them |
//! | [`Kernel::Portable`] | 6x16 with AVX, else 4x8 | one rounding with FMA or NEON, else two | otherwise |
//!
//! The AVX-512 kernel runs each product on 12x32 tiles or on tiles one vector wide, whichever
//! the shape fills better (a product 16 columns wide fills half of a 32-wide tile); see
//! [`gemm`](super::gemm).
//!
//! Without the `std` feature there is no detection: the choice is the best kernel the build's
//! target features enable (`-C target-cpu` or `-C target-feature`).
//!
//! # Bits
//!
//! Within one kernel, a product gives the same bits for any number of threads, path, blocking
//! or orientation (see [`gemm`](super::gemm)). The kernels that round `mul_add` once give the
//! same bits as each other and as a `Portable` kernel built with FMA: a default build on an
//! AVX2 machine gives the bits of a `-C target-cpu=native` build. A `Portable` kernel without
//! FMA (SSE2) rounds twice and gives other bits.
//!
//! The environment variable `FUSEGRAPH_CPU_CAPABILITY` caps the choice, as PyTorch's
//! `ATEN_CPU_CAPABILITY` does: `portable`, `avx2` or `avx512` (the best kernel available at or
//! below it). Set it to the same value on every machine of a cluster whose CPUs differ, to get
//! the same kernel everywhere; a value it does not know is refused with a panic naming the
//! values it knows, since a mistyped cap would silently change the bits.

use core::fmt;
use core::sync::atomic::{AtomicU8, Ordering};

/// An instruction set the GEMM's microkernel is compiled for (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `wide`'s `f32x8`, with the instructions the build's target features give it.
    Portable,
    /// 256-bit AVX2 with FMA (x86 only).
    Avx2Fma,
    /// 512-bit AVX-512F (x86 only).
    Avx512,
}

/// The environment variable that caps [`Kernel::active`].
pub const CAPABILITY_VAR: &str = "FUSEGRAPH_CPU_CAPABILITY";

impl Kernel {
    /// Every kernel, from the most portable to the widest.
    pub const ALL: [Kernel; 3] = [Kernel::Portable, Kernel::Avx2Fma, Kernel::Avx512];

    /// The name `FUSEGRAPH_CPU_CAPABILITY` takes for this kernel.
    pub const fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Avx2Fma => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }

    /// The instructions the kernel runs on this build, e.g. `portable f32x8 (SSE2)`.
    pub const fn describe(self) -> &'static str {
        match self {
            Kernel::Portable => portable_description(),
            Kernel::Avx2Fma => "AVX2+FMA, 6x16 tiles",
            Kernel::Avx512 => "AVX-512F, 12x32 and 16x16 tiles",
        }
    }

    /// Whether the kernel is compiled into this build and runs on this CPU: with the `std`
    /// feature the CPU is asked; without it, only what the build's target features enable
    /// counts.
    pub fn available(self) -> bool {
        match self {
            Kernel::Portable => true,
            Kernel::Avx2Fma => has_avx2_fma(),
            Kernel::Avx512 => has_avx512(),
        }
    }

    /// The best kernel the build's target features enable, whatever the CPU.
    pub const fn compiled() -> Kernel {
        if cfg!(all(
            any(target_arch = "x86", target_arch = "x86_64"),
            target_feature = "avx512f"
        )) {
            Kernel::Avx512
        } else if cfg!(all(
            any(target_arch = "x86", target_arch = "x86_64"),
            target_feature = "avx2",
            target_feature = "fma"
        )) {
            Kernel::Avx2Fma
        } else {
            Kernel::Portable
        }
    }

    /// The best kernel that is [`available`](Self::available) and not above `cap`.
    pub fn best_up_to(cap: Kernel) -> Kernel {
        Kernel::ALL
            .into_iter()
            .filter(|k| *k <= cap && k.available())
            .max()
            .unwrap_or(Kernel::Portable)
    }

    /// The kernel every product of this process runs on: the best available one, capped by
    /// `FUSEGRAPH_CPU_CAPABILITY` (feature `std`); chosen on the first call and kept.
    ///
    /// # Panics
    /// If `FUSEGRAPH_CPU_CAPABILITY` holds a value other than `portable`, `avx2` or `avx512`.
    pub fn active() -> Kernel {
        static CHOSEN: AtomicU8 = AtomicU8::new(UNSET);
        let known = CHOSEN.load(Ordering::Relaxed);
        if known != UNSET {
            return Kernel::ALL[usize::from(known)];
        }
        let kernel = Kernel::best_up_to(cap());
        CHOSEN.store(kernel as u8, Ordering::Relaxed);
        kernel
    }

    /// The kernel named `name` (as [`name`](Self::name) spells it, any case).
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.describe())
    }
}

/// [`Kernel::active`] before its first call.
const UNSET: u8 = u8::MAX;

/// What `wide`'s `f32x8` compiles to in this build.
const fn portable_description() -> &'static str {
    if cfg!(all(target_feature = "avx", target_feature = "fma")) {
        "portable f32x8 (AVX+FMA)"
    } else if cfg!(target_feature = "avx") {
        "portable f32x8 (AVX)"
    } else if cfg!(all(target_feature = "sse2", target_feature = "fma")) {
        "portable f32x8 (SSE2+FMA)"
    } else if cfg!(target_feature = "sse2") {
        "portable f32x8 (SSE2)"
    } else if cfg!(all(target_arch = "aarch64", target_feature = "neon")) {
        "portable f32x8 (NEON)"
    } else {
        "portable f32x8 (scalar)"
    }
}

/// The cap from `FUSEGRAPH_CPU_CAPABILITY` (feature `std`), else the widest kernel.
fn cap() -> Kernel {
    #[cfg(feature = "std")]
    if let Some(value) = std::env::var_os(CAPABILITY_VAR) {
        let value = value.to_string_lossy();
        return Kernel::from_name(&value).unwrap_or_else(|| {
            panic!("{CAPABILITY_VAR}={value:?}: write portable, avx2 or avx512")
        });
    }
    Kernel::Avx512
}

/// AVX2 and FMA on this CPU (feature `std`) or in this build.
fn has_avx2_fma() -> bool {
    #[cfg(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64")))]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64"))))]
    {
        Kernel::compiled() >= Kernel::Avx2Fma
    }
}

/// AVX-512F on this CPU (feature `std`) or in this build.
fn has_avx512() -> bool {
    #[cfg(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64")))]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64"))))]
    {
        Kernel::compiled() >= Kernel::Avx512
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_caps_hold() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::from_name(k.name()), Some(k));
            assert_eq!(Kernel::from_name(&k.name().to_uppercase()), Some(k));
            assert!(Kernel::best_up_to(k) <= k);
            assert!(Kernel::best_up_to(k).available());
        }
        assert_eq!(Kernel::from_name("sse9"), None);
        assert_eq!(Kernel::best_up_to(Kernel::Portable), Kernel::Portable);
        assert!(Kernel::compiled().available());
        assert_eq!(Kernel::active(), Kernel::best_up_to(cap()));
    }
}
