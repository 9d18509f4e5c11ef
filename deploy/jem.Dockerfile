# syntax=docker/dockerfile:1.7
# CE job execution manager (JEM). Build from the repository root:
#   docker build -f deploy/jem.Dockerfile -t ce-jem .
# Same process as outside Docker: node --import tsx apps/jem/src/main.ts
FROM node:20-bookworm-slim

# Slurm back end: the Slurm client commands (sbatch, squeue, scancel, sacct) and munge. The site
# mounts its slurm.conf (/etc/slurm) and the host's munge socket (/run/munge); the container runs
# no munged of its own. Debian bookworm ships Slurm 22.05: its clients talk to a slurmctld of the
# same or the next two major releases only, so newer clusters build with their own packages
# (SLURM_PACKAGES) or mount the site's binaries and set lrms.slurm.binPath.
ARG SLURM_PACKAGES="slurm-client munge"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${SLURM_PACKAGES} ca-certificates \
 && rm -rf /var/lib/apt/lists/*

ENV NODE_ENV=production \
    PNPM_HOME=/pnpm \
    COREPACK_ENABLE_DOWNLOAD_PROMPT=0
WORKDIR /app
RUN corepack enable

COPY pnpm-lock.yaml pnpm-workspace.yaml package.json ./
RUN --mount=type=cache,id=pnpm,target=/pnpm/store pnpm fetch --frozen-lockfile

COPY packages ./packages
COPY apps/jem ./apps/jem
# --prod=false: NODE_ENV=production would make pnpm skip tsx (a root devDependency) that runs the JEM.
RUN --mount=type=cache,id=pnpm,target=/pnpm/store \
    pnpm install --offline --frozen-lockfile --prod=false --filter "@ce/jem..." --filter ce-rest

USER node
EXPOSE 8445
CMD ["node", "--import", "tsx", "apps/jem/src/main.ts"]
