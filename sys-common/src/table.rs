//! [`define_fn_table!`](crate::define_fn_table): the function-table struct and its loader,
//! generated from a vendor list shaped like `for_each_hip_fn!`'s / `for_each_acl_fn!`'s.

/// Generates a vendor function table from a list shaped like `for_each_hip_fn!`'s: the
/// struct (one `unsafe extern "C" fn` field per required function, one `Option` per
/// optional one, the source, and the `libloading::Library` it owns), its symbol lists,
/// its loaders and its positional constructor.
///
/// Invoked by a sys crate as the callback of its list, with the struct's attributes and
/// name, the vendor's [`SearchOrder`](crate::SearchOrder) and the path of the module
/// whose `types::*` the list's types come from:
///
/// ```text
/// for_each_hip_fn!(
///     devipc_sys_common::define_fn_table;
///     /// docs
///     pub struct HipApi;
///     search = crate::discovery::SEARCH_ORDER;
/// );
/// ```
///
/// The generated inherent items, the same on every table:
/// - `REQUIRED_SYMBOLS`, `OPTIONAL_SYMBOLS`: the names, in list order;
/// - `source()`: where the functions come from;
/// - `missing_optional()`: the optional functions the table lacks;
/// - `unsafe load(path)`: one file or soname (`Error::LibraryNotFound` with one attempt,
///   or `Error::MissingSymbol`);
/// - `unsafe load_first(&[Candidate])`: the first candidate that opens decides;
/// - `discover()` / `discover_with_env(env)`: `load_first` over the search order's
///   candidates for the process environment or an injected one;
/// - `from_library(library, path)` (private) and `__from_fns(source, fns...)` (hidden,
///   `unsafe`): the loader and the constructor the emulator and link-mode macros use;
/// - `Debug` (source, whether it owns a library, missing optional functions), and a
///   compile-time assertion that the table is `Send + Sync`.
///
/// The types of the list are written bare and resolve where this expands: put the sys
/// crate's `use crate::types::*;` in scope there.
#[macro_export]
macro_rules! define_fn_table {
    (
        [
            $(#[$smeta:meta])* $vis:vis struct $Table:ident;
            search = $search:expr;
        ]
        required { $( $(#[$rdoc:meta])* fn $rname:ident($($rarg:ident: $rty:ty),* $(,)?) -> $rret:ty; )* }
        optional { $( $(#[$odoc:meta])* fn $oname:ident($($oarg:ident: $oty:ty),* $(,)?) -> $oret:ty; )* }
    ) => {
        $(#[$smeta])*
        #[allow(non_snake_case)]
        $vis struct $Table {
            source: $crate::__private::LibrarySource,
            /// The library the pointers point into, kept loaded as long as they exist;
            /// `None` when linked or emulated.
            library: ::core::option::Option<$crate::__private::Library>,
            $(
                $(#[$rdoc])*
                pub $rname: unsafe extern "C" fn($($rarg: $rty),*) -> $rret,
            )*
            $(
                $(#[$odoc])*
                ///
                /// Optional: `None` when the runtime lacks it.
                pub $oname: ::core::option::Option<unsafe extern "C" fn($($oarg: $oty),*) -> $oret>,
            )*
        }

        // The table must stay shareable across threads (the backends put it in an `Arc`):
        // every field is a function pointer, `Option<Library>` or `LibrarySource`, all
        // `Send + Sync`, and both vendor runtimes may be called from any thread (they keep
        // the current device per thread, which callers manage). This fails to compile if a
        // field ever stops being `Send + Sync`.
        const _: () = {
            const fn assert_send_sync<T: Send + Sync>() {}
            assert_send_sync::<$Table>();
        };

        #[allow(non_snake_case, dead_code)]
        impl $Table {
            /// Every required symbol, in list order. A library lacking one does not load.
            pub const REQUIRED_SYMBOLS: &'static [&'static str] = &[$(stringify!($rname)),*];
            /// Every optional symbol (`Option` fields), in list order.
            pub const OPTIONAL_SYMBOLS: &'static [&'static str] = &[$(stringify!($oname)),*];

            /// Where the functions come from: a loaded library's path,
            /// `LibrarySource::Linked` or `LibrarySource::Emulated`.
            pub fn source(&self) -> &$crate::__private::LibrarySource {
                &self.source
            }

            /// The optional functions this table lacks, in list order: what the runtime
            /// is too old for. Empty for a current runtime and for the emulator.
            pub fn missing_optional(&self) -> ::std::vec::Vec<&'static str> {
                let mut missing = ::std::vec::Vec::new();
                $(
                    if self.$oname.is_none() {
                        missing.push(stringify!($oname));
                    }
                )*
                missing
            }

            #[doc = concat!("Loads the runtime from one file (a path with a directory) or soname \
                (searched by the dynamic loader) and resolves every function.\n\n\
                Fails with `Error::LibraryNotFound` (one attempt, origin `", stringify!($Table),
                "::load`, with the loader's message) when the loader cannot open it, and with \
                `Error::MissingSymbol` naming the first [required](Self::REQUIRED_SYMBOLS) \
                function it lacks. Missing optional functions are `None`.\n\n\
                # Safety\n\
                Loading runs the library's initialisers, and every function found under a \
                vendor name is trusted to be that vendor function: `path` must be the vendor \
                runtime (or a faithful emulation such as the devipc emulator's cdylib), not an \
                arbitrary library that happens to export these names.")]
            pub unsafe fn load(path: impl ::core::convert::AsRef<::std::path::Path>)
                -> $crate::__private::Result<Self>
            {
                let candidate = $crate::Candidate::new(
                    path.as_ref(),
                    concat!(stringify!($Table), "::load"),
                );
                // SAFETY: forwarded to our caller.
                unsafe { Self::load_first(::core::slice::from_ref(&candidate)) }
            }

            /// Tries the candidates in order and returns the table of the first one the
            /// dynamic loader opens.
            ///
            /// The first library that opens decides: if it lacks a required function the
            /// result is `Error::MissingSymbol` and later candidates are not tried (a
            /// library that loads but is incomplete is a misconfiguration to report, not
            /// to paper over). When none opens, the result is `Error::LibraryNotFound`
            /// listing every candidate with its loader error.
            ///
            /// # Safety
            /// As for [`load`](Self::load), for every candidate.
            pub unsafe fn load_first(candidates: &[$crate::Candidate])
                -> $crate::__private::Result<Self>
            {
                let search: $crate::SearchOrder = $search;
                let (library, chosen) = $crate::open_first(search.backend, candidates, |c| {
                    // SAFETY: the caller vouches that each candidate is the vendor runtime,
                    // so its initialisers are the vendor's.
                    unsafe { $crate::__private::Library::new(&c.path) }.map_err(|e| e.to_string())
                })?;
                // SAFETY: as above; the library is the vendor runtime.
                unsafe { Self::from_library(library, chosen.path.clone()) }
            }

            /// Finds and loads the runtime in the order of the crate's `discovery`
            /// module (DESIGN section 8), reading the process environment.
            ///
            /// Errors as [`load_first`](Self::load_first). This function is safe on the
            /// same terms as linking against the vendor library: the candidates are the
            /// vendor's install locations and library names, or the file the user named in
            /// the override variable; all are trusted to be the vendor runtime. Use
            /// [`load`](Self::load) for a path that did not come from the user.
            pub fn discover() -> $crate::__private::Result<Self> {
                Self::discover_with_env(|key| ::std::env::var_os(key))
            }

            /// [`discover`](Self::discover) with an injected environment lookup instead of
            /// the process environment.
            pub fn discover_with_env(
                env: impl Fn(&str) -> ::core::option::Option<::std::ffi::OsString>,
            ) -> $crate::__private::Result<Self> {
                let search: $crate::SearchOrder = $search;
                let candidates = search.candidates(env);
                // SAFETY: the candidates are the vendor's library names in its install
                // locations, or the user's explicit override: the same trust the dynamic
                // linker gives LD_LIBRARY_PATH, as documented on `discover`.
                unsafe { Self::load_first(&candidates) }
            }

            /// Resolves every symbol in `library`, loaded from `path`.
            ///
            /// # Safety
            /// `library` must be the vendor runtime: each symbol found under a vendor name
            /// must be the C function of that name with the list's prototype.
            unsafe fn from_library(
                library: $crate::__private::Library,
                path: ::std::path::PathBuf,
            ) -> $crate::__private::Result<Self> {
                $(
                    // SAFETY: the requested type is the symbol's C prototype (the vendor
                    // headers, checked by each sys crate's ABI tests); the caller guarantees
                    // the library is the vendor runtime. The pointer is stored next to
                    // `library`, which stays loaded as long as it.
                    let $rname = match unsafe {
                        library.get::<unsafe extern "C" fn($($rty),*) -> $rret>(
                            concat!(stringify!($rname), "\0").as_bytes(),
                        )
                    } {
                        Ok(symbol) => *symbol,
                        Err(_) => {
                            return Err($crate::__private::Error::MissingSymbol {
                                library: path,
                                symbol: stringify!($rname),
                            });
                        }
                    };
                )*
                $(
                    // SAFETY: as for the required symbols above.
                    let $oname = unsafe {
                        library.get::<unsafe extern "C" fn($($oty),*) -> $oret>(
                            concat!(stringify!($oname), "\0").as_bytes(),
                        )
                    }
                    .ok()
                    .map(|symbol| *symbol);
                )*
                Ok($Table {
                    source: $crate::__private::LibrarySource::Loaded(path),
                    library: Some(library),
                    $($rname,)*
                    $($oname,)*
                })
            }

            /// Builds a table from functions given in list order; used by the emulator
            /// macros (`*_api_from_module!`) and `linked()`.
            ///
            /// # Safety
            /// Each function must implement the vendor C function of its parameter's name.
            #[doc(hidden)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn __from_fns(
                source: $crate::__private::LibrarySource,
                $( $rname: unsafe extern "C" fn($($rty),*) -> $rret, )*
                $( $oname: ::core::option::Option<unsafe extern "C" fn($($oty),*) -> $oret>, )*
            ) -> Self {
                $Table {
                    source,
                    library: None,
                    $($rname,)*
                    $($oname,)*
                }
            }
        }

        impl ::core::fmt::Debug for $Table {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.debug_struct(stringify!($Table))
                    .field("source", &self.source)
                    .field("owns_library", &self.library.is_some())
                    .field("missing_optional", &self.missing_optional())
                    .finish_non_exhaustive()
            }
        }
    };
}
