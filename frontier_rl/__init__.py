"""frontier_rl: prompt selection at the learning frontier for RL with verifiable rewards."""
