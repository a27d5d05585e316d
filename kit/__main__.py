from kit.cli import main

main()
