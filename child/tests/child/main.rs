//! devipc-child's integration tests, in one test binary: one module per topic. Children
//! run the `child_role` test of the module that starts them.

mod lifecycle;
mod stuck;
