from accelbench.command import main

main()
