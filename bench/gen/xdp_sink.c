/* Receive sink for the generator benchmark: attaches a two-instruction XDP
 * program (XDP_DROP or XDP_PASS) to an interface with a BPF link and holds it
 * until killed; the link goes with the process, so nothing stays attached.
 *   xdp_sink IFACE drop|pass                                                  */
#include <linux/bpf.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static long bpf(int cmd, union bpf_attr *a) { return syscall(__NR_bpf, cmd, a, sizeof(*a)); }

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: xdp_sink IFACE drop|pass\n"); return 2; }
  struct bpf_insn prog[] = {
    { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = strcmp(argv[2], "pass") ? 1 : 2 },
    { .code = BPF_JMP | BPF_EXIT },
  };
  union bpf_attr a;
  memset(&a, 0, sizeof a);
  a.prog_type = BPF_PROG_TYPE_XDP; a.insns = (unsigned long)prog; a.insn_cnt = 2;
  a.license = (unsigned long)"GPL";
  int fd = bpf(BPF_PROG_LOAD, &a);
  if (fd < 0) { perror("xdp_sink: BPF_PROG_LOAD"); return 1; }
  memset(&a, 0, sizeof a);
  a.link_create.prog_fd = fd; a.link_create.target_ifindex = if_nametoindex(argv[1]);
  a.link_create.attach_type = BPF_XDP;
  if (bpf(BPF_LINK_CREATE, &a) < 0) { perror("xdp_sink: BPF_LINK_CREATE"); return 1; }
  pause();
  return 0;
}
