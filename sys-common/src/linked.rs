//! Link mode: the `extern "C"` block of a vendor list ([`declare_linked_fns!`]) and the
//! table filled from it ([`linked_table!`]), for each sys crate's feature `link`.
//!
//! [`declare_linked_fns!`]: crate::declare_linked_fns
//! [`linked_table!`]: crate::linked_table

/// Callback of a vendor list that declares its **required** functions in an
/// `unsafe extern "C"` block linked against the named library:
/// `for_each_hip_fn!(devipc_sys_common::declare_linked_fns; "amdhip64")` gives
///
/// ```text
/// #[link(name = "amdhip64")]
/// unsafe extern "C" {
///     pub(crate) fn hipInit(flags: c_uint) -> hipError_t;
///     // ...
/// }
/// ```
///
/// Only the required functions are declared: an optional one may be missing from the
/// linked runtime, and a declared but undefined symbol would fail the link;
/// [`linked_table!`](crate::linked_table) finds those at run time. The list's types must
/// be in scope where this expands.
#[macro_export]
macro_rules! declare_linked_fns {
    (
        [$lib:literal]
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        #[link(name = $lib)]
        #[allow(non_snake_case)]
        unsafe extern "C" {
            $( pub(crate) fn $rname($($rarg: $rty),*) -> $rret; )*
        }
    };
}

/// Callback of a vendor list that builds the linked table:
/// `for_each_hip_fn!(devipc_sys_common::linked_table; crate::HipApi; externs)` takes the
/// required functions from the `extern` block that
/// [`declare_linked_fns!`](crate::declare_linked_fns) put in module `externs` (a module
/// in scope where this expands), and
/// looks the optional ones up in the process (where the linked library stays loaded for
/// the life of the process), `None` when the runtime lacks them. The table's source is
/// `LibrarySource::Linked`.
///
/// The expansion is an expression that is safe to evaluate on the terms of the `extern`
/// block: the declarations must be the vendor's exact prototypes.
#[macro_export]
macro_rules! linked_table {
    (
        [$Table:ty; $externs:ident]
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {{
        #![allow(non_snake_case)] // the optional functions' C names
        let this = $crate::__private::UnixLibrary::this();
        $(
            // SAFETY: the requested type is the symbol's C prototype (the vendor header);
            // the process links the vendor runtime, which is never unloaded, so the
            // pointer outlives `this`.
            let $oname = unsafe {
                this.get::<unsafe extern "C" fn($($oty),*) -> $oret>(
                    concat!(stringify!($oname), "\0").as_bytes(),
                )
            }
            .ok()
            .map(|symbol| *symbol);
        )*
        // SAFETY: the `extern` block holds declarations of the vendor's functions with
        // their exact prototypes, resolved by the linker against the vendor library; the
        // optional ones were found under their vendor names in the same process.
        unsafe {
            <$Table>::__from_fns(
                $crate::__private::LibrarySource::Linked,
                $( $externs::$rname, )*
                $( $oname, )*
            )
        }
    }};
}
