//! Deployment of Xoff: the netns testbed builder behind `xoff testbed`, plus (in this folder)
//! topology files, the install script and the Mininet switch class.

#![forbid(unsafe_code)]

pub mod clab;
pub mod testbed;
