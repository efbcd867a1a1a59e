//! Importers: seed 001's TRex-fork files, pcap/pcapng captures.
