"""Policy training on a learned reward: VecEnv wrappers, agents, replay relabelling."""
