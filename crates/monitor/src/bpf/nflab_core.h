/* The few kernel types nflab's BPF programs read, declared by hand instead of a
 * generated vmlinux.h. Every struct carries preserve_access_index, so each field
 * access is a CO-RE relocation that libbpf resolves against the running kernel's
 * BTF at load time: the members listed here only need to exist in the kernel under
 * these names, not at these offsets. (Members inside anonymous unions, such as
 * iov_iter's ubuf, are found by libbpf's search through anonymous members.) */
#ifndef NFLAB_CORE_H
#define NFLAB_CORE_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
typedef unsigned long size_t;
#define true 1
#define false 0

/* UAPI values (stable ABI). */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_RINGBUF = 27,
};
enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

/* XDP's context and verdicts, and the ring buffer's flags (UAPI, stable ABI: the
 * verifier rewrites context accesses, so no CO-RE here). */
struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};
enum xdp_action {
	XDP_ABORTED = 0,
	XDP_DROP = 1,
	XDP_PASS = 2,
};
enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
	BPF_RB_AVAIL_DATA = 0,
};

struct bpf_dynptr {
	__u64 __opaque[2];
} __attribute__((aligned(8)));

/* A complete type (not a declaration): libbpf checks the kfuncs' prototypes kind by kind. */
struct __sk_buff {
	__u32 len;
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct ns_common {
	unsigned int inum;
};

struct net {
	struct ns_common ns;
};

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
};

struct sock_common {
	possible_net_t skc_net;
	__u16 skc_num;
};

struct sk_buff {
	unsigned int len;
	unsigned char *data;
	struct net_device *dev;
	struct sock *sk;
};

struct flowi_common {
	int flowic_iif;
};

struct flowi4 {
	struct flowi_common __fl_common;
};

struct sock {
	struct sock_common __sk_common;
};

struct fib_nh_common;

struct iovec {
	void *iov_base;
	size_t iov_len;
};

struct iov_iter {
	__u8 iter_type;
	size_t iov_offset;
	const struct iovec *__iov;
	void *ubuf;
	size_t count;
};

struct nsproxy {
	struct net *net_ns;
};

struct task_struct {
	struct nsproxy *nsproxy;
};

struct msghdr {
	struct iov_iter msg_iter;
};

#pragma clang attribute pop

enum iter_type {
	ITER_UBUF = 0,
	ITER_IOVEC = 1,
};

#endif
