//! Applications that run across the DuT beside the probes (NCSbench, PRRT, the SDN ACL use case), and their figures as columns.

pub mod ncs;
pub(crate) mod plant_ns;
pub mod prrt;
pub mod results;
pub mod sdn_acl;
