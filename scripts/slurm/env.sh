# Source me: exports SLURM_CONF for the test Slurm started by start-slurm.sh.
#
#   . scripts/slurm/env.sh [DIR]     DIR defaults to $CE_SLURM_DIR or /tmp/ce-slurm-$(id -u)
#
# Clients (sbatch, squeue, scontrol, sacct) read /etc/slurm/slurm.conf otherwise, which does not exist.
CE_SLURM_DIR=${1:-${CE_SLURM_DIR:-/tmp/ce-slurm-$(id -u)}}
export CE_SLURM_DIR
export SLURM_CONF="$CE_SLURM_DIR/etc/slurm.conf"
if [ ! -f "$SLURM_CONF" ]; then
  echo "env.sh: $SLURM_CONF does not exist; run scripts/slurm/start-slurm.sh $CE_SLURM_DIR" >&2
fi
