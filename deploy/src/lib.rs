//! Deployment: netns testbed builder, topology files, install script.
