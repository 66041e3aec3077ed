from frontier_rl.cli import main

main()
