/* Shared by nflab's BPF programs: the packet key (payload hash and nflab probe),
 * read from an skb through a dynptr (tp_btf programs and the UDP monitor's socket
 * filter: works on paged skbs too) or from the user buffer a UDP send is called with. */
#ifndef NFLAB_PACKET_H
#define NFLAB_PACKET_H

/* Bytes of UDP payload that make the key; the nflab probe header (18 bytes:
 * magic, version, flow, seq, tx_ns) lies within them. */
#define KEY_BYTES 32
#define PROBE_MAGIC 0xa7
#define PROBE_VERSION 1
#define PROBE_HEADER_LEN 18
#define IPPROTO_UDP 17
#define ETH_HLEN 14

extern int bpf_dynptr_from_skb(struct __sk_buff *skb, __u64 flags,
			       struct bpf_dynptr *ptr__uninit) __ksym;

struct pkt_key {
	__u64 hash;
	__u64 seq;
	__u16 flow;
	__u8 has_seq;
	__u8 pad[5];
};

static __always_inline __u32 dev_netns(struct net_device *dev)
{
	return BPF_CORE_READ(dev, nd_net.net, ns.inum);
}

static __always_inline __u32 sock_netns(struct sock *sk)
{
	return BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
}

static __always_inline __u16 be16(const __u8 *b)
{
	return ((__u16)b[0] << 8) | b[1];
}

/* FNV-1a over the first n (<= KEY_BYTES) bytes: the same bytes in the kernel's
 * receive path and in the send call give the same hash. */
static __always_inline void key_from_payload(const __u8 *p, __u32 n, struct pkt_key *k)
{
	__u64 h = 0xcbf29ce484222325ULL;
	for (int i = 0; i < KEY_BYTES; i++) {
		if (i >= n)
			break;
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	k->hash = h;
	k->has_seq = 0;
	k->seq = 0;
	k->flow = 0;
	if (n >= PROBE_HEADER_LEN && p[0] == PROBE_MAGIC && p[1] == PROBE_VERSION) {
		k->has_seq = 1;
		k->flow = be16(p + 2);
		k->seq = ((__u64)p[4] << 40) | ((__u64)p[5] << 32) | ((__u64)p[6] << 24) |
			 ((__u64)p[7] << 16) | ((__u64)p[8] << 8) | p[9];
	}
}

/* Parse the IPv4/UDP headers at byte `base` of the skb's data: the UDP
 * destination port, and where the payload starts and how long it is. Returns 0
 * for a UDP datagram, -1 otherwise. */
static __always_inline int skb_udp_header(const struct sk_buff *skb, __u32 base,
					  struct bpf_dynptr *d, __u16 *dport, __u32 *at, __u32 *len)
{
	__u8 ip[20];
	__u8 udp[8];
	__u32 ihl, n;

	if (bpf_dynptr_from_skb((struct __sk_buff *)skb, 0, d))
		return -1;
	if (bpf_dynptr_read(ip, sizeof(ip), d, base, 0))
		return -1;
	if ((ip[0] >> 4) != 4 || ip[9] != IPPROTO_UDP)
		return -1;
	ihl = (ip[0] & 0xf) * 4;
	if (ihl < 20)
		return -1;
	if (bpf_dynptr_read(udp, sizeof(udp), d, base + ihl, 0))
		return -1;
	*dport = be16(udp + 2);
	n = be16(udp + 4);
	if (n < 8)
		return -1;
	*at = base + ihl + 8;
	*len = n - 8;
	return 0;
}

/* The key of the `len`-byte UDP payload at byte `at` behind `d`. */
static __always_inline int dynptr_payload_key(struct bpf_dynptr *d, __u32 at, __u32 len,
					      struct pkt_key *k)
{
	__u8 payload[KEY_BYTES] = {};
	/* 64 bits wide: a 32-bit value is zero-extended into a new register before the
	 * comparison, and the bound the verifier learns there does not reach the
	 * register clang hands to the read. */
	__u64 n = len;

	if (n > KEY_BYTES)
		n = KEY_BYTES;
	if (n > 0 && bpf_dynptr_read(payload, n, d, at, 0))
		return -1;
	key_from_payload(payload, n, k);
	return 0;
}

/* Parse IPv4/UDP at byte `base` of the skb's data; fills the key and the UDP
 * destination port. Returns 0 for a UDP datagram, -1 otherwise. */
static __always_inline int skb_udp_key(const struct sk_buff *skb, __u32 base, struct pkt_key *k,
				       __u16 *dport)
{
	struct bpf_dynptr d;
	__u32 at, len;

	if (skb_udp_header(skb, base, &d, dport, &at, &len))
		return -1;
	return dynptr_payload_key(&d, at, len, k);
}

/* The key of a UDP payload that starts at byte `at` of the skb's data (a datagram
 * in a socket's queue: the UDP header is pulled already). */
static __always_inline int skb_payload_key(const struct sk_buff *skb, __u32 at, struct pkt_key *k)
{
	struct bpf_dynptr d;
	__u8 payload[KEY_BYTES] = {};
	__u32 n;

	if (bpf_dynptr_from_skb((struct __sk_buff *)skb, 0, &d))
		return -1;
	n = BPF_CORE_READ(skb, len);
	if (n < at)
		return -1;
	n -= at;
	if (n > KEY_BYTES)
		n = KEY_BYTES;
	if (n > 0 && bpf_dynptr_read(payload, n, &d, at, 0))
		return -1;
	key_from_payload(payload, n, k);
	return 0;
}

/* A key parked on this CPU by the receive tracepoint for the hooks that follow in
 * the same softirq pass but see no skb (sk_data_ready, fib_table_lookup). */
struct parked {
	struct pkt_key key;
	__u8 valid;
	__u8 routed;
	__u8 pad[6];
};

#endif
