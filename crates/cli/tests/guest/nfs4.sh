# 1 socket x 2 cores x 2 threads, given the kernel NFS server (smt-vm.sh --nfsd):
# nfs-sfs on nfsd. A guest of its own: the SMT checks of smt4.sh fill their guest's time.
. /bin/lib.sh
topo_and_placements 1c1t 1c2t
nfs_checks
finish
