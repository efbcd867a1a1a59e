/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Ring-buffer wakeups shared by the monitors and the capture tap. */
#ifndef NFLAB_RINGBUF_H
#define NFLAB_RINGBUF_H

#include "nflab_core.h"
#include <bpf/bpf_helpers.h>

/* Commit flags for a record: no wakeup per record — the consumer polls on its
 * own schedule (the capture every few ms, the UDP monitor at its sampling and
 * buffer-fill instants, ≤ 10 ms apart), and waking it for each of tens of
 * thousands of records a second costs an irq_work and an IPI each (measured: ~27 000 of each per
 * second at 20 kpps) on the very host being measured — unless `ring` already
 * holds `threshold` bytes, which wakes it at once. */
static __always_inline __u64 ringbuf_wakeup_flags(void *ring, __u64 threshold)
{
	return bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >= threshold ? BPF_RB_FORCE_WAKEUP :
									 BPF_RB_NO_WAKEUP;
}

#endif
