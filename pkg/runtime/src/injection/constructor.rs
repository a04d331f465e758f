//! The controllers of a process as values: a name (what `--disable-controllers`
//! takes) and the function that builds the controller from the injection
//! context.
//!
//! An application declares its reconciler modules once, with
//! [`controllers!`](crate::controllers), which both declares the modules and
//! lists their constructors; the process's `main`, a local run and tests that
//! count controllers (or their leases) all read that one list, so adding a
//! reconciler edits no other file. It is a macro rather than generated code
//! because the list names the application's reconcilers, which depend on the
//! generated crate: a generated list would have to live in a crate that the
//! generated crate cannot see.

use std::fmt;
use std::sync::Arc;

use super::Context;
use crate::controller::Impl;

/// How a [`Constructor`] builds its controller: a function, or a closure over
/// settings the process read before (the webhook's names and clock).
type Build = Arc<dyn Fn(&Context) -> Impl + Send + Sync>;

/// One controller of the process: its name and the function that builds it.
#[derive(Clone)]
pub struct Constructor {
    name: &'static str,
    new: Build,
}

impl Constructor {
    /// A controller called `name`, built by `new`.
    pub fn new(name: &'static str, new: impl Fn(&Context) -> Impl + Send + Sync + 'static) -> Self {
        Constructor {
            name,
            new: Arc::new(new),
        }
    }

    /// `new` named after the module its path names:
    /// `reconcilers::addressableservice::new_controller` is `addressableservice`.
    pub fn from_path(path: &'static str, new: fn(&Context) -> Impl) -> Self {
        let mut segments = path.rsplit("::").map(str::trim);
        let last = segments.next().unwrap_or(path);
        Constructor::new(segments.next().unwrap_or(last), new)
    }

    /// The controller's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Builds the controller.
    pub fn construct(&self, ctx: &Context) -> Impl {
        (self.new)(ctx)
    }
}

impl fmt::Debug for Constructor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Constructor").field(&self.name).finish()
    }
}

/// Declares reconciler modules and `pub fn controllers()`, the list of their
/// constructors: each module must have `pub fn new_controller(&Context) -> Impl`,
/// and its controller is named after the module.
///
/// ```ignore
/// // reconcilers/src/lib.rs
/// kinject_runtime::controllers! {
///     /// AddressableService: points its status at a Service.
///     pub mod addressableservice;
///     pub mod simpledeployment;
/// }
/// // cmd/controller/src/main.rs
/// kinject_sharedmain::main("controller", reconcilers::controllers())
/// ```
#[macro_export]
macro_rules! controllers {
    ($($(#[$attr:meta])* $vis:vis mod $module:ident;)*) => {
        $($(#[$attr])* $vis mod $module;)*

        /// Every controller of this crate, one per reconciler module, in the
        /// order they are declared.
        pub fn controllers() -> ::std::vec::Vec<$crate::injection::Constructor> {
            ::std::vec::Vec::from([
                $($crate::injection::Constructor::new(stringify!($module), $module::new_controller),)*
            ])
        }
    };
}
